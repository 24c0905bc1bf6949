# cython: language_level=3
# cython: freethreading_compatible=True
"""Usage located by dialect and rewritten in place: the Cython twin of ``_usage_py``.

The same steps over the raw buffer, with ``_members_c``'s member scanner (cimported); counts
are formatted in C. The rules are ``_dialects``' table and the counts are checked by
``_usage_py.make_rules``, so both twins write the same bytes.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from libc.string cimport memcmp, memcpy

from tokcore.members._members_c cimport (
    tok_key_is, tok_last_member, tok_member, tok_object, tok_object_next, tok_object_open,
    tok_is_object_line, tok_is_object_text, tok_object_memo, tok_raw_key_is, tok_value_error,
)

from tokcore._args import payload_bytes
from tokcore.stream._dialects import (
    DIALECTS, FOREIGN, MAX_COUNT_DIGITS, NONE, NOT_OBJECT, REWRITTEN, UNREADABLE, dialect,
)
from tokcore.members._members_py import key_text, utf8
from tokcore.stream._usage_py import Rules, make_rules

cdef extern from "Python.h":
    long long PyLong_AsLongLongAndOverflow(object o, int *overflow) except? -1

cdef extern from "_ssescan.h":
    Py_ssize_t tok_next_candidate(const char *p, Py_ssize_t n, int with_cr) noexcept nogil

cdef enum:
    NULL_TAIL_WINDOW = 64  # the backwards "usage": null check looks at most this far back

cdef enum:  # UsageRules.keys indexes
    KEY_PROMPT = 0, KEY_OUTPUT, KEY_TOTAL, KEY_DETAILS, KEY_CACHED, KEY_ZEROED, KEY_PATH0, KEY_PATH1

cdef int O_NONE = NONE, O_REWRITTEN = REWRITTEN, O_FOREIGN = FOREIGN
cdef int O_NOT_OBJECT = NOT_OBJECT, O_UNREADABLE = UNREADABLE
cdef int COUNT_DIGITS = MAX_COUNT_DIGITS
cdef const char *ZERO = b"0"
cdef long long BIG = 1LL << 62  # a total_base from here on is added with Python ints


cdef class UsageRules:
    """``_usage_py.Rules`` as C strings and ints."""

    def __init__(self, rules):
        spec = self.dialect = rules.dialect
        self.py = rules
        names = [spec.prompt_key, spec.output_key, spec.total_key or "", spec.details_key or "",
                 spec.cached_key, spec.zeroed_key or ""]
        path_names = []
        self.path_count = len(spec.paths)
        assert 1 <= self.path_count <= 2
        for p, path in enumerate(spec.paths):
            assert 1 <= len(path) <= 2
            self.path_steps[p] = len(path)
            for s, key in enumerate(path):
                if key not in path_names:
                    path_names.append(key)
                self.path_key[p][s] = KEY_PATH0 + path_names.index(key)
        names += path_names
        assert len(names) <= 8
        self.str_keys = names
        raws = [utf8(name) for name in names]
        texts = [key_text(name) + b":" for name in names]
        self.keep = raws + texts
        for i in range(len(names)):
            assert len(texts[i]) <= 64  # every added member fits an edit's text
            self.keys[i] = PyBytes_AS_STRING(raws[i])
            self.key_lens[i] = PyBytes_GET_SIZE(raws[i])
            self.key_texts[i] = PyBytes_AS_STRING(texts[i])
            self.key_text_lens[i] = PyBytes_GET_SIZE(texts[i])
        self.has_total = spec.total_key is not None
        self.has_details = spec.details_key is not None
        self.has_zeroed = spec.zeroed_key is not None
        self.add_cached = rules.add_cached
        self.single_path = self.path_count == 1
        self.cached_excluded = spec.cached_excluded
        self.prompt, self.total_base, self.cached = rules.prompt, rules.total_base, rules.cached


# a UsageRules per dialect name, its counts unset: what tok_rules copies the keys from
cdef dict _KEYS = {name: UsageRules(make_rules(0, None, name)) for name in DIALECTS}


cdef inline bint _plain_count(object value, long long *out) noexcept:
    """``value`` is an exact int (not a bool) in [0, 2**63): ``*out`` is it."""
    cdef int overflow = 0
    cdef long long v
    if type(value) is not int:
        return False
    v = PyLong_AsLongLongAndOverflow(value, &overflow)
    if overflow or v < 0:
        return False
    out[0] = v
    return True


cdef UsageRules tok_rules(object prompt_tokens, object cached_tokens, object api):
    cdef long long prompt, cached = 0
    cdef UsageRules keys, r
    if type(api) is not str or not _plain_count(prompt_tokens, &prompt):
        return None
    if cached_tokens is not None and (not _plain_count(cached_tokens, &cached)
                                      or cached > prompt):
        return None
    keys = _KEYS.get(api)
    if keys is None:
        return None
    r = UsageRules.__new__(UsageRules)
    r.keep, r.str_keys, r.dialect = keys.keep, keys.str_keys, keys.dialect
    memcpy(r.keys, keys.keys, sizeof(r.keys))
    memcpy(r.key_lens, keys.key_lens, sizeof(r.key_lens))
    memcpy(r.key_texts, keys.key_texts, sizeof(r.key_texts))
    memcpy(r.key_text_lens, keys.key_text_lens, sizeof(r.key_text_lens))
    r.path_count = keys.path_count
    memcpy(r.path_steps, keys.path_steps, sizeof(r.path_steps))
    memcpy(r.path_key, keys.path_key, sizeof(r.path_key))
    r.has_total, r.has_details, r.has_zeroed = keys.has_total, keys.has_details, keys.has_zeroed
    r.single_path, r.cached_excluded = keys.single_path, keys.cached_excluded
    # as make_rules: the prompt key's value, the total's base, the cached count
    r.prompt = prompt - cached if keys.cached_excluded else prompt
    r.total_base, r.cached = prompt, cached
    r.add_cached = cached_tokens is not None
    return r


cdef UsageRules tok_checked_rules(object prompt_tokens, object cached_tokens, object api):
    cdef UsageRules r = tok_rules(prompt_tokens, cached_tokens, api)
    if r is None:  # the checks and their errors are make_rules'
        r = UsageRules(make_rules(prompt_tokens, cached_tokens, api))
    return r


cdef object tok_py_rules(UsageRules r):
    if r.py is None:
        r.py = Rules(r.dialect, r.prompt, r.total_base, r.cached, r.add_cached)
    return r.py


cdef bint tok_may_hold_usage(const char *d, Py_ssize_t n) noexcept nogil:
    return tok_next_candidate(d, n, 0) >= 0


cdef inline bint _is_ws(unsigned char c) noexcept nogil:
    return c == 32 or c == 9 or c == 10 or c == 13


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


cdef bint tok_null_usage_text(const unsigned char *d, Py_ssize_t n,
                              tok_object_memo *memo) noexcept nogil:
    return tok_ends_with_null_usage(d, n) and tok_is_object_text(d, n, memo)


cdef bint tok_null_usage_line(const unsigned char *d, Py_ssize_t n,
                              tok_object_memo *memo) noexcept nogil:
    return tok_ends_with_null_usage(d, n) and tok_is_object_line(d, n, memo)


cdef bint tok_ends_with_null_usage(const unsigned char *d, Py_ssize_t n) noexcept nogil:
    """Backwards: ``[,{] ws "usage" ws : ws null ws } ws END`` within the last 64 bytes."""
    cdef Py_ssize_t lowest = n - NULL_TAIL_WINDOW if n > NULL_TAIL_WINDOW else 0
    cdef Py_ssize_t i
    if n >= 14 and memcmp(d + n - 14, b',"usage":null}', 14) == 0:
        return True  # the compact spelling, as every server writes it
    i = _back_over_token(d, n - 1, b"}", 1)
    i = _back_over_token(d, i, b"null", 4)
    i = _back_over_token(d, i, b":", 1)
    i = _back_over_token(d, i, b'"usage"', 7)
    i = _back_over_ws(d, i)
    return i >= lowest and (d[i] == 44 or d[i] == 123)


# --- finding members -----------------------------------------------------------------------

cdef inline int _key_is(UsageRules r, const unsigned char *d, const tok_member *m,
                        int k) except -1:
    if not m.key_escaped:
        return tok_raw_key_is(d, m, r.keys[k], r.key_lens[k])
    return tok_key_is(d, m, r.keys[k], r.key_lens[k], r.str_keys[k])


cdef int _members(UsageRules r, tok_object *o, tok_member *members,
                  tok_member *last) except -2:
    """Scan the whole object: the last member of each key KEY_PROMPT..KEY_CACHED into
    ``members`` (key_start -1 if absent) and its last member into ``last``; 0, or -1 when
    it is not an object."""
    cdef tok_member m
    cdef int r_next, k
    for k in range(KEY_PATH0):
        members[k].key_start = -1
    while True:
        r_next = tok_object_next(o, &m)
        if r_next <= 0:
            return r_next
        last[0] = m
        for k in range(KEY_PATH0):
            if r.key_lens[k] and _key_is(r, o.d, &m, k):
                members[k] = m


cdef inline int _lookup(UsageRules r, tok_object *o, int key, tok_member *found,
                        tok_member *last) except -2:
    """``tok_last_member`` for one of the rules' keys."""
    return tok_last_member(o, r.keys[key], r.key_lens[key], r.str_keys[key], found, last)


cdef int _path_member(UsageRules r, const unsigned char *d, const tok_member *m, int p,
                      tok_member *found) except -2:
    """Path ``p``'s member under the top-level member ``m`` (its first key's): 1 with it in
    ``found``, 0 for none (a one-key path: ``m`` itself), -1 when ``m``'s object is not one."""
    cdef tok_object o
    if r.path_steps[p] == 1:
        found[0] = m[0]
        return 1
    if d[m.value_start] != 123:  # a step whose value is not an object has nothing under it
        return 0
    if tok_object_open(&o, d, m.value_start, m.value_end, False) < 0:
        return -1
    return _lookup(r, &o, r.path_key[p][1], found, NULL)


cdef int _locate(UsageRules r, const unsigned char *d, Py_ssize_t n,
                 Py_ssize_t *start, Py_ssize_t *end) except -2:
    """``_usage_py.locate``: O_NONE with the span (start -1: nowhere), or O_UNREADABLE. The
    top-level object is read once; every object under a path's first key is read member by
    member, as a streamed event's are."""
    cdef tok_object o
    cdef tok_member m
    cdef tok_member found[2]
    cdef int hit[2]
    cdef int p, got
    start[0] = -1
    if tok_object_open(&o, d, 0, n, True) < 0:
        return O_UNREADABLE
    hit[0] = hit[1] = 0
    while True:
        got = tok_object_next(&o, &m)
        if got < 0:
            return O_UNREADABLE
        if got == 0:
            break
        for p in range(r.path_count):
            if _key_is(r, d, &m, r.path_key[p][0]):
                hit[p] = _path_member(r, d, &m, p, &found[p])
                if hit[p] < 0:
                    return O_UNREADABLE
    for p in range(r.path_count):
        if hit[p] and not (found[p].value_end - found[p].value_start == 4 and
                           memcmp(d + found[p].value_start, b"null", 4) == 0):
            start[0], end[0] = found[p].value_start, found[p].value_end
            return O_NONE
    return O_NONE


# --- writing edits -------------------------------------------------------------------------

cdef char *_put(char *out, const char *s, Py_ssize_t n) noexcept nogil:
    memcpy(out, s, n)
    return out + n


cdef char *_put_int(char *out, long long value) noexcept nogil:
    cdef char digits[24]
    cdef int k = 0
    cdef bint negative = value < 0
    cdef unsigned long long v = <unsigned long long>value
    if negative:
        v = 0ULL - v
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


cdef inline char *_put_key(char *out, UsageRules r, int key) noexcept:
    """``"key":``, the key written as ``_members_py.key_text`` writes it."""
    return _put(out, r.key_texts[key], r.key_text_lens[key])


cdef char *_put_total(char *out, UsageRules r, long long count) except NULL:
    if r.total_base < BIG:
        return _put_int(out, r.total_base + count)
    text = str(<object>r.total_base + <object>count).encode("ascii")  # Python ints: no wrap
    return _put(out, PyBytes_AS_STRING(text), PyBytes_GET_SIZE(text))


cdef tok_edit *_edit(tok_edits *e, Py_ssize_t start, Py_ssize_t end) noexcept nogil:
    cdef tok_edit *edit = &e.edit[e.count]
    e.count += 1
    edit.start, edit.end, edit.size = start, end, 0
    return edit


cdef int _output_count(const unsigned char *d, Py_ssize_t a, Py_ssize_t b,
                       long long *count) noexcept nogil:
    """``_usage_py.output_count``: 1 with the count (0 for a value of another kind), or 0
    for an integer of more than 18 digits."""
    cdef Py_ssize_t i = a
    cdef long long value = 0
    cdef bint negative = False
    count[0] = 0
    if i < b and d[i] == 45:
        negative = True
        i += 1
    if i >= b or not (48 <= d[i] <= 57) or (d[i] == 48 and i + 1 < b):
        return 1  # not a JSON integer (empty, leading zero, no digit): 0
    while i < b:
        if not (48 <= d[i] <= 57):
            return 1
        i += 1
    if b - a - negative > COUNT_DIGITS:
        return 0
    for i in range(a + negative, b):
        value = value * 10 + (d[i] - 48)
    count[0] = -value if negative else value
    return 1


cdef int _details(UsageRules r, const unsigned char *d, const tok_member *details,
                  tok_edits *e, char **added) except -2:
    """The cached count into the details member (``_usage_py._details_edits``); -1 when its
    object cannot be read."""
    cdef tok_object o
    cdef tok_member found, last
    cdef tok_edit *edit
    cdef char *out
    cdef int hit
    if not r.add_cached and (details.key_start < 0 or d[details.value_start] != 123):
        return 0  # no count of the caller's: only an existing member is set
    if details.key_start < 0:
        out = _put(added[0], b",", 1)
        out = _put_key(out, r, KEY_DETAILS)
        out = _put(out, b"{", 1)
        out = _put_key(out, r, KEY_CACHED)
        out = _put_int(out, r.cached)
        added[0] = _put(out, b"}", 1)
        return 0
    if d[details.value_start] != 123:
        edit = _edit(e, details.value_start, details.value_end)
        out = _put(edit.text, b"{", 1)
        out = _put_key(out, r, KEY_CACHED)
        out = _put_int(out, r.cached)
        out = _put(out, b"}", 1)
        edit.size = out - edit.text
        return 0
    tok_object_open(&o, d, details.value_start, details.value_end, False)
    last.key_start = -1
    hit = _lookup(r, &o, KEY_CACHED, &found, &last)
    if hit < 0:
        return -1
    if hit:
        edit = _edit(e, found.value_start, found.value_end)
        out = _put_int(edit.text, r.cached)
    elif not r.add_cached:
        return 0
    elif last.key_start >= 0:
        edit = _edit(e, last.value_end, last.value_end)
        out = _put_key(_put(edit.text, b",", 1), r, KEY_CACHED)
        out = _put_int(out, r.cached)
    else:
        edit = _edit(e, o.opening + 1, o.opening + 1)
        out = _put_int(_put_key(edit.text, r, KEY_CACHED), r.cached)
    edit.size = out - edit.text
    return 0


cdef void _set(UsageRules r, tok_edits *e, const tok_member *m, int key, const char *text,
               const char *text_end, char **added) noexcept:
    """A count member set to ``text``: its value replaced, or the member added to ``added``
    (the group that goes after the usage object's last member, in rule order)."""
    cdef tok_edit *edit
    if m.key_start < 0:
        added[0] = _put(_put_key(_put(added[0], b",", 1), r, key), text, text_end - text)
    else:
        edit = _edit(e, m.value_start, m.value_end)
        edit.size = _put(edit.text, text, text_end - text) - edit.text


cdef void _sort(tok_edits *e) noexcept nogil:
    cdef int i, j
    cdef tok_edit swap
    for i in range(1, e.count):
        j = i
        while j > 0 and (e.edit[j - 1].start > e.edit[j].start or
                         (e.edit[j - 1].start == e.edit[j].start and
                          e.edit[j - 1].end > e.edit[j].end)):
            swap = e.edit[j - 1]
            e.edit[j - 1] = e.edit[j]
            e.edit[j] = swap
            j -= 1


cdef int _usage_edits(UsageRules r, const unsigned char *d, Py_ssize_t n,
                      tok_edits *e) except -1:
    cdef Py_ssize_t start, end
    cdef tok_object o
    cdef tok_member last
    cdef tok_member members[KEY_PATH0]  # by KEY_PROMPT .. KEY_CACHED
    cdef tok_edit *edit
    cdef char added[TOK_EDIT_TEXT]
    cdef char number[32]
    cdef char *tail = added
    cdef long long count = 0
    cdef int outcome = _locate(r, d, n, &start, &end)
    e.count = 0
    if start < 0 or outcome != O_NONE:
        return outcome
    if d[start] != 123:
        return O_NOT_OBJECT
    if tok_value_error(d, start, end) >= 0:  # not one JSON value: never rewritten
        return O_UNREADABLE
    tok_object_open(&o, d, start, end, False)
    last.key_start = last.value_end = -1
    if _members(r, &o, members, &last) < 0:
        return O_UNREADABLE
    if members[KEY_PROMPT].key_start < 0 and members[KEY_OUTPUT].key_start < 0:
        return O_FOREIGN
    _set(r, e, &members[KEY_PROMPT], KEY_PROMPT, number, _put_int(number, r.prompt), &tail)
    if r.has_total:
        if members[KEY_OUTPUT].key_start >= 0 and not _output_count(
                d, members[KEY_OUTPUT].value_start, members[KEY_OUTPUT].value_end, &count):
            e.count = 0
            return O_UNREADABLE
        _set(r, e, &members[KEY_TOTAL], KEY_TOTAL, number, _put_total(number, r, count), &tail)
    if r.has_details:
        if _details(r, d, &members[KEY_DETAILS], e, &tail) < 0:
            e.count = 0
            return O_UNREADABLE
    elif r.add_cached or members[KEY_CACHED].key_start >= 0:
        _set(r, e, &members[KEY_CACHED], KEY_CACHED, number, _put_int(number, r.cached), &tail)
    if r.has_zeroed and members[KEY_ZEROED].key_start >= 0:
        _set(r, e, &members[KEY_ZEROED], KEY_ZEROED, ZERO, ZERO + 1, &tail)
    if tail != added:
        edit = _edit(e, last.value_end, last.value_end)
        memcpy(edit.text, added, tail - added)
        edit.size = tail - added
    _sort(e)
    return O_REWRITTEN


cdef inline bint _no_usage(UsageRules r, const unsigned char *d, Py_ssize_t n,
                           tok_object_memo *memo) noexcept nogil:
    """The byte pre-filters (``_usage_py.no_usage``): no spelling of the key, or (for a
    dialect with the one path ``usage``) a JSON object text whose last top-level member is
    ``"usage":null`` (memo: the relay's, or NULL)."""
    return not tok_may_hold_usage(<const char *>d, n) or (r.single_path and
                                                          tok_null_usage_text(d, n, memo))


cdef int tok_usage_edits(UsageRules r, const unsigned char *d, Py_ssize_t n,
                         tok_edits *e, tok_object_memo *memo) except -1:
    e.count = 0
    if _no_usage(r, d, n, memo):
        return O_NONE
    return _usage_edits(r, d, n, e)


cdef bytes tok_apply_edits(const char *d, Py_ssize_t n, Py_ssize_t base, const tok_edits *e):
    cdef Py_ssize_t size = n, copied = 0, at
    cdef int k
    for k in range(e.count):
        size += e.edit[k].size - (e.edit[k].end - e.edit[k].start)
    cdef bytes result = PyBytes_FromStringAndSize(NULL, size)
    cdef char *out = PyBytes_AS_STRING(result)
    for k in range(e.count):
        at = base + e.edit[k].start
        out = _put(out, d + copied, at - copied)
        out = _put(out, e.edit[k].text, e.edit[k].size)
        copied = base + e.edit[k].end
    _put(out, d + copied, n - copied)
    return result


# --- the public functions ------------------------------------------------------------------

def find_usage(payload, *, api="chat"):
    """Byte span of the usage value of a JSON object text, or None."""
    cdef Py_ssize_t start, end
    cdef UsageRules r
    data = payload if type(payload) is bytes else payload_bytes(payload)
    r = _KEYS.get(api) if type(api) is str else None  # only the keys are read here
    if r is None:
        dialect(api)  # the error for a wrong api
        r = _KEYS[api]  # api is a str subclass
    cdef const unsigned char *d = <const unsigned char *>PyBytes_AS_STRING(data)
    cdef Py_ssize_t n = PyBytes_GET_SIZE(data)
    if _no_usage(r, d, n, NULL):
        return None
    _locate(r, d, n, &start, &end)
    return None if start < 0 else (start, end)


def rewrite_usage(payload, prompt_tokens, cached_tokens=None, *, api="chat"):
    """The payload with only its usage counts rewritten (see the contract)."""
    cdef tok_edits e
    data = payload if type(payload) is bytes else payload_bytes(payload)
    cdef UsageRules r = tok_checked_rules(prompt_tokens, cached_tokens, api)
    if tok_usage_edits(r, <const unsigned char *>PyBytes_AS_STRING(data),
                       PyBytes_GET_SIZE(data), &e, NULL) != O_REWRITTEN:
        return data
    return tok_apply_edits(PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data), 0, &e)
