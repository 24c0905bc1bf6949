# cython: language_level=3
# cython: freethreading_compatible=True
"""JSON object members without parsing: the Cython twin of ``_members_py``.

The scan is ``_members_py.scan_object``'s, step for step, over the raw buffer: strings are
skipped to the next quote (escaped when an odd run of backslashes precedes it; inline for the
first 64 bytes, then ``memchr``), nested values by a depth counter over the brackets outside
strings (``_json_valid.h``: 16 bytes a step with SSE2 while a block has no backslash). Keys
spelled with escapes are decoded by ``_members_py.decode_key``; argument checks and messages
come from ``_args``.
"""

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from libc.string cimport memchr, memcmp, memcpy, memset

from tokcore._kernels import unknown_kernel
from tokcore._args import check_path, check_switch, payload_bytes, payload_view
from tokcore.members._members_py import decode_key, key_text, not_json, utf8

cdef extern from "_json_valid.h":
    Py_ssize_t tok_json_value_error_simd(const unsigned char *d, Py_ssize_t start,
                                         Py_ssize_t end, int simd) noexcept nogil
    bint TOK_VALID_SSE2
    const unsigned char *tok_find_quote(const unsigned char *d, Py_ssize_t i,
                                        Py_ssize_t end) noexcept nogil
    Py_ssize_t tok_find_nested_stop(const unsigned char *d, Py_ssize_t i,
                                    Py_ssize_t end) noexcept nogil
    Py_ssize_t tok_skip_nested(const unsigned char *d, Py_ssize_t i,
                               Py_ssize_t end) noexcept nogil

cdef extern from "_json_object.h":
    int tok_object_kernel
    void tok_object_init() noexcept nogil
    int tok_object_text(const unsigned char *d, Py_ssize_t n, int *line,
                        tok_object_memo *memo) noexcept nogil
    int tok_object_text_with(int kernel, const unsigned char *d, Py_ssize_t n, int *line,
                             tok_object_memo *memo) noexcept nogil

tok_object_init()
# the object-text check's kernels by their number in ``_json_object.h``, in the vocabulary of
# tokcore/_kernels.py ("avx512": AVX-512BW; avx2 and avx512 want PCLMUL too)
_OBJECT_KERNELS = ("scalar", "avx2", "avx512", "neon")
# what this CPU runs, plainest first: the scalar check, then up to the best (picked at import)
_KERNELS = (("scalar",) + _OBJECT_KERNELS[1:tok_object_kernel + 1]
            if tok_object_kernel != 3 else ("scalar", "neon"))


def _kernels():
    """The object check's kernels on this CPU, the scalar one first and the best last."""
    return _KERNELS


def _kernel():
    """The object check's kernel in use."""
    return _OBJECT_KERNELS[tok_object_kernel]


def _use_kernel(name):
    """Check with the kernel ``name`` (one of ``_kernels()``; for the tests and benchmarks),
    in this twin and in the relay's (which cimports it); returns the name in use before."""
    global tok_object_kernel
    if name not in _KERNELS:
        raise unknown_kernel(name, _KERNELS)
    before = _OBJECT_KERNELS[tok_object_kernel]
    tok_object_kernel = _OBJECT_KERNELS.index(name)
    return before

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
        q = tok_find_quote(d, i, end)
        if q == NULL:
            return -1
        at = q - d
        back = at
        while back > i and d[back - 1] == 92:
            back -= 1
        if (at - back) % 2 == 0:
            return at + 1
        i = at + 1


cdef inline bint _has_backslash(const unsigned char *d, Py_ssize_t i,
                                Py_ssize_t end) noexcept nogil:
    """Whether d[i:end] holds a backslash (a key: short, so no call to memchr)."""
    if end - i > 64:
        return memchr(d + i, 92, end - i) != NULL
    while i < end:
        if d[i] == 92:
            return True
        i += 1
    return False


cdef inline Py_ssize_t _skip_nested(const unsigned char *d, Py_ssize_t i,
                                    Py_ssize_t end) noexcept nogil:
    """Just past the object or array that opens at ``i``; -1 when it does not close (the
    depth rule of ``_members_py.skip_nested``, in ``_json_valid.h``)."""
    return tok_skip_nested(d, i, end)


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
    m.key_escaped = _has_backslash(d, m.key_start + 1, k - 1)
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


cdef bint tok_is_object_text(const unsigned char *d, Py_ssize_t n,
                             tok_object_memo *memo) noexcept nogil:
    """Whether ``d[:n]`` is a JSON object text as ``tok_object_next`` reads one (the
    pre-filter of a last ``"usage":null``): the vector kernel's answer where it has one.
    ``memo``: the caller's memo of its last object (``_json_object_memo.h``), or NULL."""
    cdef int line
    cdef int answer = tok_object_text(d, n, &line, memo)
    return answer if answer >= 0 else _object_text_scalar(d, n)


cdef bint tok_is_object_line(const unsigned char *d, Py_ssize_t n,
                             tok_object_memo *memo) noexcept nogil:
    """``tok_is_object_text``, on one line: no LF or CR in ``d[:n]`` (the relay's test of
    a ``data`` field; the kernel sees them as it reads the text). ``memo``: the caller's
    memo of its last object (``_json_object_memo.h``), or NULL."""
    cdef int line
    cdef int answer = tok_object_text(d, n, &line, memo)
    if answer >= 0:
        return answer == 1 and not line
    return _one_line(d, n) and _object_text_scalar(d, n)


cdef inline bint _one_line(const unsigned char *d, Py_ssize_t n) noexcept nogil:
    return memchr(d, 10, n) == NULL and memchr(d, 13, n) == NULL


cdef bint _object_text_scalar(const unsigned char *d, Py_ssize_t n) noexcept nogil:
    """``tok_is_object_text`` byte by byte: ``tok_object_next``'s steps and none of its
    bookkeeping."""
    cdef Py_ssize_t i = 0
    cdef unsigned char cls
    if n >= 3 and d[0] == 0xEF and d[1] == 0xBB and d[2] == 0xBF:
        i = 3
    i = _skip_ws(d, i, n)
    if i >= n or d[i] != 123:
        return False
    i = _skip_ws(d, i + 1, n)
    if i < n and d[i] == 125:
        return _skip_ws(d, i + 1, n) == n
    while True:
        if i >= n or d[i] != 34:
            return False
        i = _skip_string(d, i, n)
        if i < 0:
            return False
        i = _skip_ws(d, i, n)
        if i >= n or d[i] != 58:
            return False
        i = _skip_ws(d, i + 1, n)
        if i >= n:
            return False
        cls = CLASS[d[i]]
        if cls == C_QUOTE:
            i = _skip_string(d, i, n)
        elif cls == C_OPEN:
            i = _skip_nested(d, i, n)
        elif cls == C_OTHER:
            i += 1
            while i < n and CLASS[d[i]] == C_OTHER:
                i += 1
        else:
            return False
        if i < 0:
            return False
        i = _skip_ws(d, i, n)
        if i >= n:
            return False
        if d[i] == 125:
            return _skip_ws(d, i + 1, n) == n
        if d[i] != 44:
            return False
        i = _skip_ws(d, i + 1, n)


def _is_object_text(data, kernel=None, bint one_line=False):
    """``tok_is_object_text`` (``tok_is_object_line`` with ``one_line``) of a bytes-like
    object (``kernel`` None), or with the kernel of that name from ``_OBJECT_KERNELS``
    ("scalar": the scalar check alone; a kernel the CPU lacks: the scalar check): for the
    tests that compare them."""
    data = payload_bytes(data, "data")
    cdef const unsigned char *d = <const unsigned char *>PyBytes_AS_STRING(data)
    cdef Py_ssize_t n = PyBytes_GET_SIZE(data)
    cdef int answer, line = 0
    if kernel is None:
        return tok_is_object_line(d, n, NULL) if one_line else tok_is_object_text(d, n, NULL)
    answer = tok_object_text_with(_OBJECT_KERNELS.index(kernel), d, n, &line, NULL)
    if answer < 0:
        answer = _object_text_scalar(d, n)
        line = not _one_line(d, n)
    return answer == 1 and not (one_line and line)


cdef int _object_agree(int kernel, const unsigned char *alphabet, int k, unsigned char *buf,
                       Py_ssize_t n, Py_ssize_t at, int length,
                       tok_object_memo *memo) noexcept nogil:
    """Every input that is buf[:n] with its window buf[at:at + length] made of the k bytes
    of ``alphabet``: 0 when the kernel and the scalar check agree on all (and, for an
    object, the kernel sees a LF or CR where memchr does), else 1 with buf holding the first
    where they do not."""
    cdef int digits[64]
    cdef int j, w, line
    cdef unsigned char *window = buf + at
    for j in range(length):
        digits[j] = 0
        window[j] = alphabet[0]
    while True:
        w = tok_object_text_with(kernel, buf, n, &line, memo)
        if w >= 0 and (w != _object_text_scalar(buf, n)
                       or (w == 1 and line != (not _one_line(buf, n)))):
            return 1
        j = 0  # the next input: an odometer over the window
        while j < length:
            digits[j] += 1
            if digits[j] < k:
                break
            digits[j] = 0
            window[j] = alphabet[0]
            j += 1
        if j == length:
            return 0
        window[j] = alphabet[digits[j]]


def _memo_taken(texts, str kernel="avx2"):
    """The texts through one memo, as a relay's events: for each, how many of the memo's
    blocks it went on from, or -1 when the memo's text answered (it differs from the text only
    inside a string); for the tests that check the memo is used."""
    return [taken for _, _, taken in _memo_answers(texts, kernel)]


def _memo_answers(texts, str kernel="avx2"):
    """The texts through one memo, as a relay's events: for each, ``(answer, line, taken)``,
    the kernel's answer (-1: the scalar check decides), whether it saw a LF or CR (for an
    object) and ``_memo_taken``'s figure; for the tests that compare them with the scalar
    check."""
    cdef tok_object_memo kept
    cdef int answer, line, number = _OBJECT_KERNELS.index(kernel)
    cdef bytes text
    tok_object_memo_clear(&kept)
    answers = []
    for text in texts:
        line = 0
        answer = tok_object_text_with(number, <const unsigned char *>PyBytes_AS_STRING(text),
                                      PyBytes_GET_SIZE(text), &line, &kept)
        answers.append((answer, bool(line) if answer == 1 else None, kept.taken))
    return answers


def _object_text_agree(bytes alphabet, int length, bytes before=b"", bytes after=b"",
                       str kernel="avx2", bint memo=False):
    """Every input ``before + window + after`` with a window of ``length`` bytes over
    ``alphabet``, that kernel against the scalar check: None when they agree on all (or
    the CPU has no such kernel), else the first input where they differ. With ``memo``,
    one memo goes from input to input, as a relay's from event to event."""
    cdef tok_object_memo kept
    tok_object_memo_clear(&kept)
    cdef int number = _OBJECT_KERNELS.index(kernel)
    if not 0 <= length <= 64 or not alphabet or len(alphabet) ** length > 1 << 24:
        raise ValueError("at most 2**24 inputs, a window of 0 to 64 bytes, a non-empty alphabet")
    cdef bytes template = before + alphabet[:1] * length + after
    cdef Py_ssize_t n = len(template), at = len(before)
    # a new object, never shared (a short bytes may be a cached one): written in place below
    cdef bytes bad = PyBytes_FromStringAndSize(NULL, n)
    cdef unsigned char *buf = <unsigned char *>PyBytes_AS_STRING(bad)
    cdef const unsigned char *chars = alphabet
    cdef int found, k = <int>len(alphabet)
    memcpy(buf, PyBytes_AS_STRING(template), n)
    with nogil:
        found = _object_agree(number, chars, k, buf, n, at, length, &kept if memo else NULL)
    return bad if found else None


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


cdef Py_ssize_t tok_value_error(const unsigned char *d, Py_ssize_t start,
                                Py_ssize_t end) except -2:
    cdef Py_ssize_t r = tok_json_value_error_simd(d, start, end, 1)
    if r == -2:
        raise MemoryError()
    return r


def _value_error(data, bint simd=True):
    """``_members_py.value_error`` of the whole of ``data`` (bytes-like): -1 for one JSON value,
    else where it stops; ``simd`` False runs the portable string loop (for the tests)."""
    data = payload_bytes(data, "data")
    cdef Py_ssize_t r = tok_json_value_error_simd(
        <const unsigned char *>PyBytes_AS_STRING(data), 0, PyBytes_GET_SIZE(data),
        1 if simd and TOK_VALID_SSE2 else 0)
    if r == -2:
        raise MemoryError()
    return r


cdef inline tuple _keys(path):
    return (path,) if type(path) is str else check_path(path)


cdef _not_an_object(Py_ssize_t offset, tuple path):
    where = "payload is not a JSON object" if not path else \
        f"the value at {path!r} is not a JSON object"
    return ValueError(f"{where}: the scan stopped at offset {offset}")


cdef int _open_at(tok_object *o, const unsigned char *d, Py_ssize_t start, Py_ssize_t end,
                  tuple keys, Py_ssize_t step) except -1:
    """``_members_py.path_object``'s check: open the object at ``keys[:step]`` (the whole text
    for step 0), or its ``ValueError``."""
    if step and d[start] != 123:
        raise _not_an_object(start, keys[:step])
    if tok_object_open(o, d, start, end, step == 0) < 0:
        raise _not_an_object(o.error, keys[:step])
    return 0


cdef int _next(tok_object *o, tok_member *m, tuple keys, Py_ssize_t step) except -1:
    """``tok_object_next``, with the ``ValueError`` of an object on the path that is not."""
    cdef int r = tok_object_next(o, m)
    if r < 0:
        raise _not_an_object(o.error, keys[:step])
    return r


cdef int _find_in(tok_object *o, tuple keys, Py_ssize_t step, tok_member *found,
                  Py_ssize_t *last_end) except -1:
    """Scan the opened object to its end: 1 with the last member of ``keys[step]`` in
    ``found``, else 0; ``last_end``: just past its last member's value (-1 when empty)."""
    cdef tok_member m
    cdef int hit = 0
    key = keys[step]
    raw = utf8(key)
    last_end[0] = -1
    while _next(o, &m, keys, step):
        last_end[0] = m.value_end
        if tok_key_is(o.d, &m, PyBytes_AS_STRING(raw), PyBytes_GET_SIZE(raw), key):
            found[0] = m
            hit = 1
    return hit


def find_member(payload, path):
    """The byte span of the value at ``path`` in a JSON object text, or None when a key on
    the way is absent."""
    cdef tok_object o
    cdef tok_member found
    cdef const unsigned char *d
    cdef Py_ssize_t start = 0, end, step, last_end
    data = payload_bytes(payload)
    cdef tuple keys = _keys(path)
    d = <const unsigned char *>PyBytes_AS_STRING(data)
    end = PyBytes_GET_SIZE(data)
    for step in range(len(keys)):
        _open_at(&o, d, start, end, keys, step)
        if not _find_in(&o, keys, step, &found, &last_end):
            return None
        start, end = found.value_start, found.value_end
    return start, end


cdef bytes _joined(const char *d, Py_ssize_t n, Py_ssize_t at, Py_ssize_t cut,
                   bytes a, bytes b, bytes c, const char *v, Py_ssize_t vn):
    """``d[:at] + a + b + c + v[:vn] + d[cut:]`` in one allocation (the value read where the
    caller's buffer holds it: a memoryview of another answer is not copied first)."""
    cdef Py_ssize_t size = at + n - cut + vn
    cdef bytes part
    for part in (a, b, c):
        size += PyBytes_GET_SIZE(part)
    cdef bytes result = PyBytes_FromStringAndSize(NULL, size)
    cdef char *out = PyBytes_AS_STRING(result)
    memcpy(out, d, at)
    out += at
    for part in (a, b, c):
        memcpy(out, PyBytes_AS_STRING(part), PyBytes_GET_SIZE(part))
        out += PyBytes_GET_SIZE(part)
    memcpy(out, v, vn)
    memcpy(out + vn, d + cut, n - cut)
    return result


def set_member(payload, path, value, *, trusted=False):
    """``payload`` with the member at ``path`` set to the JSON text ``value`` (checked to be
    one JSON value unless ``trusted``); the objects of absent keys on the way are added."""
    cdef Py_buffer buf
    if trusted is not True and trusted is not False:  # it switches the check off: a bool only
        check_switch(trusted, "trusted")
    data = payload_bytes(payload)
    cdef tuple keys = _keys(path)
    if type(value) is bytes:
        return _set_value(data, keys, value, PyBytes_AS_STRING(value), PyBytes_GET_SIZE(value),
                          trusted)
    # any other bytes-like value is read where it is (a memoryview of a find_member span)
    view = payload_view(value, "value")
    PyObject_GetBuffer(view, &buf, PyBUF_SIMPLE)
    try:
        return _set_value(data, keys, view, <const char *>buf.buf, buf.len, trusted)
    finally:
        PyBuffer_Release(&buf)


cdef bytes _set_value(bytes data, tuple keys, object value, const char *v, Py_ssize_t vn,
                      bint trusted):
    """set_member's work once its arguments are checked: ``v[:vn]`` is the bytes of
    ``value``, which holds them."""
    cdef tok_object o
    cdef tok_member found
    cdef const unsigned char *d
    cdef Py_ssize_t n, start = 0, end, step, last_end, stop
    cdef bytes text
    if not trusted:
        stop = tok_value_error(<const unsigned char *>v, 0, vn)
        if stop >= 0:
            raise not_json("value", stop)
    d = <const unsigned char *>PyBytes_AS_STRING(data)
    n = end = PyBytes_GET_SIZE(data)
    for step in range(len(keys)):
        _open_at(&o, d, start, end, keys, step)
        if not _find_in(&o, keys, step, &found, &last_end):
            if step + 1 < len(keys):  # the rest of the path, as objects around the value
                text = bytes(value)
                for inner in reversed(keys[step + 1:]):
                    text = b"".join((b"{", key_text(inner), b":", text, b"}"))
                v, vn = PyBytes_AS_STRING(text), PyBytes_GET_SIZE(text)
            if last_end >= 0:
                return _joined(<const char *>d, n, last_end, last_end, b",",
                               key_text(keys[step]), b":", v, vn)
            return _joined(<const char *>d, n, o.opening + 1, o.opening + 1,
                           key_text(keys[step]), b":", b"", v, vn)
        start, end = found.value_start, found.value_end
    return _joined(<const char *>d, n, start, end, b"", b"", b"", v, vn)


def del_member(payload, path):
    """``payload`` without the member at ``path`` (every occurrence of its last key in the
    object that holds it); unchanged when a key on the way is absent."""
    cdef tok_object o
    cdef tok_member m, found
    cdef const unsigned char *d
    cdef Py_ssize_t n, first_key = -1, cut_from = -1, copied = 0
    cdef Py_ssize_t last_end = 0, removed = 0, size, start = 0, end, step, last
    cdef bint kept = False
    data = payload_bytes(payload)
    cdef tuple keys = _keys(path)
    d = <const unsigned char *>PyBytes_AS_STRING(data)
    n = end = PyBytes_GET_SIZE(data)
    last = len(keys) - 1
    for step in range(last):
        _open_at(&o, d, start, end, keys, step)
        if not _find_in(&o, keys, step, &found, &last_end):
            return data
        start, end = found.value_start, found.value_end
    _open_at(&o, d, start, end, keys, last)
    key = keys[last]
    raw = utf8(key)
    ranges = []  # (start, end) pairs to cut, in order (_members_py.removed_ranges' rule)
    while _next(&o, &m, keys, last):
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
