# cython: language_level=3
# cython: freethreading_compatible=True
"""SSE framing and the usage relay: the Cython twin of ``_relay_py``.

Blank lines and the ``"usage"`` needle are found by SIMD scans (``_ssescan.h``) over the raw
buffer; an event that may hold usage goes to ``_usage_c``'s C rewrite (cimported), and only
usage spread over several ``data`` fields takes the Python twin's shared path. The rules are
the Python twin's, step for step; argument checks and ``RelayCounts`` come from there.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.mem cimport PyMem_Free, PyMem_Malloc, PyMem_Realloc
from libc.stdint cimport uint64_t
from libc.string cimport memchr, memcmp, memcpy

from tokcore.stream._bigevent_c cimport BigEvent, tok_big_event
from tokcore.members._members_c cimport tok_object_memo, tok_object_memo_clear
from tokcore._freethreading cimport (
    tok_busy, tok_busy_enter, tok_busy_leave, tok_cs, tok_cs_end, tok_idle_begin,
)
from tokcore.stream._usage_c cimport (
    UsageRules, tok_apply_edits, tok_edits, tok_null_usage_line, tok_py_rules, tok_rules,
    tok_usage_edits,
)

from tokcore._args import Bound, in_use, payload_bytes
from tokcore._kernels import unknown_kernel
from tokcore.stream._dialects import FOREIGN, NONE, NOT_OBJECT, REWRITTEN, TOO_LARGE, UNREADABLE
from tokcore.stream._fields import rewrite_event
from tokcore.stream._relay_py import DEFAULT_MAX_EVENT_BYTES, OUTCOME_FIELDS, RelayCounts
from tokcore.stream._relay_py import UsageRelay as _PyUsageRelay

cdef extern from "_ssescan.h":
    const char *TOK_SCAN_KIND
    Py_ssize_t tok_next_candidate(const char *p, Py_ssize_t n, int with_cr) noexcept nogil
    Py_ssize_t tok_first_lflf(const char *p, Py_ssize_t n) noexcept nogil
    Py_ssize_t tok_last_lflf(const char *p, Py_ssize_t n) noexcept nogil
    Py_ssize_t tok_count_event_ends(const char *p, Py_ssize_t n) noexcept nogil
    Py_ssize_t tok_scan_events(const char *p, Py_ssize_t n, int with_cr, Py_ssize_t *ends,
                               Py_ssize_t *last) noexcept nogil
    Py_ssize_t tok_line_end(const char *p, Py_ssize_t i, Py_ssize_t n) noexcept nogil
    bint TOK_SCAN_SIMD
    void tok_scan_init() noexcept
    int tok_scan_use_avx2
    Py_ssize_t tok_scan_by_number(int which, int simd, const char *p, Py_ssize_t n) noexcept nogil
    int tok_scan_agree(const char *alphabet, int k, char *buf, Py_ssize_t n, Py_ssize_t at,
                       int length, int *which) noexcept nogil

tok_scan_init()
# The byte scans' kernels, in the vocabulary of tokcore/_kernels.py: the 16-byte loops the
# build has (sse2 on x86-64, neon on aarch64; scalar: the portable loops, elsewhere), and on
# x86-64 avx2 where the CPU has it (the scan of a read forwarded whole, 32 bytes a block).
# The portable loops are compiled everywhere; on a vector build only _scan runs them.
_VECTOR = TOK_SCAN_KIND.decode().lower() if TOK_SCAN_SIMD else "scalar"
_KERNELS = (_VECTOR, "avx2") if tok_scan_use_avx2 else (_VECTOR,)
cdef int _cpu_avx2 = tok_scan_use_avx2
# the scans _scan runs, by their number in tok_scan_by_number
_SCANS = ("next_candidate", "next_candidate_cr", "first_lflf", "last_lflf", "count_event_ends",
          "scan_events", "scan_events_cr", "nested_stop", "string_stop")


def _kernels():
    """The kernels the relay's scans run on this CPU, the plainest first and the best last."""
    return _KERNELS


def _kernel():
    """The kernel in use."""
    return "avx2" if tok_scan_use_avx2 else _VECTOR


def _use_kernel(name):
    """Scan with the kernel ``name`` (one of ``_kernels()``; for the tests and benchmarks);
    returns the name of the one in use before."""
    global tok_scan_use_avx2
    if name not in _KERNELS:
        raise unknown_kernel(name, _KERNELS)
    before = _kernel()
    tok_scan_use_avx2 = name == "avx2"
    return before


def _scan(name, bytes data, kernel=None):
    """One byte scan of ``_ssescan.h`` on ``data`` with the kernel ``kernel``: ``"scalar"``
    (the portable loops), the build's 16-byte loops, or ``None``: what the relay runs (AVX2
    where the CPU has it and it is in use). For the tests that compare them; -1 is none."""
    cdef int which = _SCANS.index(name)
    cdef int simd
    if kernel is None:
        simd = 1 if TOK_SCAN_SIMD else 0
    elif kernel == "scalar":
        simd = 0
    elif kernel == _VECTOR:
        simd = 2
    elif kernel == "avx2" and _cpu_avx2:
        simd = 1  # the relay's choice, avx2 whether or not it is in use now
    else:
        raise unknown_kernel(kernel, ("scalar",) + _KERNELS if _VECTOR != "scalar" else _KERNELS)
    if kernel == "avx2":
        saved = tok_scan_use_avx2
        _use_kernel("avx2")
        try:
            return tok_scan_by_number(which, simd, PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data))
        finally:
            _use_kernel("avx2" if saved else _VECTOR)
    return tok_scan_by_number(which, simd, PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data))


def _scan_agree(bytes alphabet, int length, bytes before=b"", bytes after=b""):
    """Every input ``before + window + after`` with a window of ``length`` bytes over
    ``alphabet``, each scan on both kinds of loops: None when they agree on all, else
    ``(scan name, the first input where they differ)``."""
    if not 0 <= length <= 64 or not alphabet or len(alphabet) ** length > 1 << 24:
        raise ValueError("at most 2**24 inputs, a window of 0 to 64 bytes, a non-empty alphabet")
    cdef bytes template = before + alphabet[:1] * length + after
    cdef Py_ssize_t n = len(template), at = len(before)
    # a new object, never shared (a short bytes may be a cached one): written in place below
    cdef bytes bad = PyBytes_FromStringAndSize(NULL, n)
    cdef char *buf = PyBytes_AS_STRING(bad)
    cdef int which = -1, found, k = <int>len(alphabet)
    cdef const char *chars = alphabet
    memcpy(buf, PyBytes_AS_STRING(template), n)
    with nogil:
        found = tok_scan_agree(chars, k, buf, n, at, length, &which)
    return (_SCANS[which], bad) if found else None

cdef int O_NONE = NONE, O_REWRITTEN = REWRITTEN
# RelayCounts fields
cdef enum:
    N_EVENTS, N_REWRITTEN, N_FOREIGN, N_NOT_OBJECT, N_UNREADABLE, N_OVERSIZED, N_TOO_LARGE, \
        N_FIELDS
    KEEP_FREED = 1 << 16  # a pending buffer larger than this is freed when it empties
    KEEP_PIECES = 256  # a piece table larger than this is freed after the read
assert OUTCOME_FIELDS == {REWRITTEN: N_REWRITTEN, FOREIGN: N_FOREIGN,
                          NOT_OBJECT: N_NOT_OBJECT, UNREADABLE: N_UNREADABLE,
                          TOO_LARGE: N_TOO_LARGE}
assert len(RelayCounts._fields) == N_FIELDS
cdef int OUTCOME_INDEX[8]
for _outcome, _field in OUTCOME_FIELDS.items():
    OUTCOME_INDEX[_outcome] = _field


cdef extern from "Python.h":
    const Py_ssize_t PY_SSIZE_T_MAX
    long long PyLong_AsLongLongAndOverflow(object o, int *overflow) except? -1

cdef object _DEFAULT_LIMIT = DEFAULT_MAX_EVENT_BYTES
# how a read of one "usage":null event ends (compact, as servers write it), as the word its
# last 8 bytes make: one compare tells the read to try it as one before any byte scan
cdef uint64_t _NULL_END
memcpy(&_NULL_END, <const char *>b':null}\n\n', 8)


cdef UsageRules _plain_arguments(tuple args, dict kwargs, Py_ssize_t *limit):
    """The rules and ``*limit`` of ``UsageRelay(*args, **kwargs)`` when its arguments are
    plain (exact ints in range, a dialect's name, no other name), else None: the Python twin
    then binds them."""
    cdef Py_ssize_t n = len(args)
    cdef long long value
    cdef int overflow = 0
    if n > 2:
        return None
    prompt = args[0] if n >= 1 else None
    cached = args[1] if n == 2 else None
    api, max_event_bytes = "chat", _DEFAULT_LIMIT
    for key, arg in kwargs.items():
        if key == "api":
            api = arg
        elif key == "max_event_bytes":
            max_event_bytes = arg
        elif key == "prompt_tokens" and n == 0:
            prompt = arg
        elif key == "cached_tokens" and n < 2:
            cached = arg
        else:
            return None
    if type(max_event_bytes) is not int:
        return None
    value = PyLong_AsLongLongAndOverflow(max_event_bytes, &overflow)
    if overflow or value < 1:
        return None
    limit[0] = <Py_ssize_t>value
    return tok_rules(prompt, cached, api)  # None for a missing or other prompt_tokens too


cdef inline bytes _forwarded(object piece, const char *d, Py_ssize_t pos, Py_ssize_t n,
                             Py_ssize_t end):
    """What ``BigEvent.feed`` gave, as bytes (None: the bytes it read, as they came)."""
    if piece is None:
        return PyBytes_FromStringAndSize(d + pos, (n if end < 0 else end) - pos)
    return piece


ctypedef struct Piece:
    const char *data
    Py_ssize_t size


cdef class UsageRelay


cdef inline tok_object_memo *_object_memo(UsageRelay relay) noexcept:
    """The relay's memo of the object check, made at its first use (NULL: no memory left)."""
    if relay._memo == NULL:
        relay._memo = <tok_object_memo *>PyMem_Malloc(sizeof(tok_object_memo))
        if relay._memo != NULL:
            tok_object_memo_clear(relay._memo)
    return relay._memo


cdef class UsageRelay:
    """Relay a ``text/event-stream`` byte stream, rewriting usage values on the way."""

    cdef UsageRules _rules
    cdef Py_ssize_t _max
    cdef Py_ssize_t _counts[N_FIELDS]
    cdef char *_pend  # the start of an event whose blank line is not here yet
    cdef Py_ssize_t _pend_len, _pend_cap
    cdef bint _line_start, _cr, _first
    # the last event was "usage":null on one data line (a stream that asked for usage sends
    # one with every chunk until the last): the next one is tried as such before any scan
    cdef bint _nulls
    cdef tok_busy _busy  # a call is running: a second one at the same time is refused
    cdef BigEvent _big  # the scan of an event too large to hold, or None
    # the object check's memo of the last "usage":null event's object, which its stream's
    # next events (alike but for their text) are compared with (_json_object_memo.h, a fixed
    # size): made at the first event that asks for it, so that a relay of a stream without
    # "usage":null events costs nothing more to make (NULL then, and when no memory was left:
    # the check runs without one)
    cdef tok_object_memo *_memo
    cdef Piece *_pieces
    cdef Py_ssize_t _piece_cap

    def __cinit__(self):
        self._pend = NULL
        self._pieces = NULL
        self._memo = NULL

    def __init__(self, *args, **kwargs):
        cdef int k
        cdef Py_ssize_t limit = 0
        # plain arguments are checked here; anything else is bound and checked by the Python
        # twin's __init__ (the one signature), which raises its errors with their messages
        cdef UsageRules rules = _plain_arguments(args, kwargs, &limit)
        if rules is None:
            bound = Bound()
            _PyUsageRelay.__init__(bound, *args, **kwargs)
            rules_py, limit = bound.values
            rules = UsageRules(rules_py)
        # a relay re-initialised while a call on it runs (a hook inside feed, another
        # thread) would have its buffers taken from under that call: refused, as a call is
        if not tok_busy_enter(self, &self._busy):
            raise in_use("UsageRelay")
        self._rules = rules
        self._max = limit
        for k in range(N_FIELDS):
            self._counts[k] = 0
        self._pend_len = 0
        self._line_start = True
        self._cr = False
        self._big = None
        self._first = True
        self._nulls = False
        tok_busy_leave(self, &self._busy)

    def __dealloc__(self):
        PyMem_Free(self._pend)
        PyMem_Free(self._pieces)
        PyMem_Free(self._memo)

    @property
    def pending_bytes(self):
        """How many bytes are held back: an event waiting for its end, or the usage value of
        an event too large to hold."""
        cdef tok_cs cs
        cdef Py_ssize_t held
        tok_idle_begin(&cs, self, &self._busy)  # no GIL: after a call running elsewhere
        held = self._pend_len + (self._big.held_bytes() if self._big is not None else 0)
        tok_cs_end(&cs)
        return held

    @property
    def counts(self):
        """What the relay has done so far (events, usage rewritten or left alone, why)."""
        cdef tok_cs cs
        cdef Py_ssize_t counts[N_FIELDS]
        tok_idle_begin(&cs, self, &self._busy)  # no GIL: after a call running elsewhere
        memcpy(counts, self._counts, sizeof(counts))
        tok_cs_end(&cs)
        return RelayCounts(*[counts[k] for k in range(N_FIELDS)])

    cdef int _hold(self, const char *d, Py_ssize_t n) except -1:
        cdef Py_ssize_t need = self._pend_len + n
        cdef char *grown
        cdef Py_ssize_t cap
        if need > self._pend_cap:  # an event held is at most the bound (+ its blank line)
            # never more than the bound and its blank line, computed without overflow for
            # every bound (up to 2**63 - 1)
            cap = min(need + need // 2 + 64,
                      max(need, self._max + min(4, PY_SSIZE_T_MAX - self._max)))
            grown = <char *>PyMem_Realloc(self._pend, cap)
            if grown == NULL:
                raise MemoryError()
            self._pend, self._pend_cap = grown, cap
        memcpy(self._pend + self._pend_len, d, n)
        self._pend_len = need
        return 0

    cdef Py_ssize_t _next_boundary(self, const char *d, Py_ssize_t pos, Py_ssize_t n,
                                   bint has_cr) noexcept nogil:
        """``_relay_py.next_boundary``: just past the first blank line from ``pos``, or -1."""
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

    cdef void _count_oversized(self, const char *d, Py_ssize_t n) noexcept nogil:
        """Count the events over the bound in ``d[:n]``: whole events from a line start, no
        CR (the fast paths that forward events without looking at each)."""
        cdef Py_ssize_t start = 0, i
        while start < n:
            if d[start] == 10:  # an empty line
                start += 1
                continue
            i = tok_first_lflf(d + start, n - start)
            if i < 0:
                return
            if i + 2 > self._max:
                self._counts[N_OVERSIZED] += 1
            start += i + 2

    cdef bint _null_usage_event(self, const char *d, Py_ssize_t n) noexcept:
        """Whether ``d[:n]`` is one event of one ``data`` line whose last top-level member is
        ``"usage":null`` (``n`` >= 2, it ends with a blank line): nothing to rewrite."""
        cdef Py_ssize_t start = 5
        if n > self._max or n < 7 or memcmp(d, b"data:", 5) != 0:
            return False
        if d[5] == 32:
            start = 6
        # one line (no LF before the blank line, no CR): the object check sees them
        if not self._rules.single_path or \
                not tok_null_usage_line(<const unsigned char *>d + start, n - 2 - start,
                                        _object_memo(self)):
            self._nulls = False
            return False
        self._cr = False
        self._first = False
        self._nulls = True
        self._counts[N_EVENTS] += 1
        return True

    cdef Py_ssize_t _next_null_event(self, const char *d, Py_ssize_t pos,
                                     Py_ssize_t n) noexcept:
        """Just past the event at ``pos`` when it is a ``"usage":null`` event
        (``_null_usage_event``) ending in ``null}`` and a blank line, else -1; only after
        such an event (``_nulls``), at a line start. Its blank line is the first LF pair
        after ``pos``: the event is one line. None of the byte scans runs: the usage key
        candidates and the CR an event of one line has are its object check's."""
        cdef const char *lf
        if not self._nulls or pos >= n or d[pos] == 10 or d[pos] == 13:
            return -1
        lf = <const char *>memchr(d + pos, 10, n - pos)
        if lf == NULL or lf + 1 >= d + n or lf[1] != 10 or lf - (d + pos) < 7 or \
                memcmp(lf - 5, b"null}", 5) != 0:
            return -1
        if not self._null_usage_event(d + pos, lf + 2 - (d + pos)):
            return -1
        self._line_start = True
        return lf + 2 - d

    cdef object _event(self, const char *d, Py_ssize_t n):
        """A complete event's rewritten bytes, or None when it goes out as it came."""
        cdef BigEvent big
        cdef Py_ssize_t end
        # the size counts up to the blank line's CR or LF (as in _relay_py)
        if d[0] != 10 and d[0] != 13:  # not an empty line
            self._counts[N_EVENTS] += 1
        if n - (n >= 2 and d[n - 2] == 13 and d[n - 1] == 10) > self._max:
            big = self._start_big()
            out = big.feed(d, 0, n, &end)
            self._end_big(big)
            return out
        return self._scan(d, n)

    cdef BigEvent _start_big(self):
        self._counts[N_OVERSIZED] += 1
        big = tok_big_event(tok_py_rules(self._rules), self._max, self._first)
        self._first = False
        return big

    cdef void _end_big(self, BigEvent big) noexcept:
        """Take the outcomes counted by a BigEvent scan so far."""
        cdef int outcome
        for outcome in range(8):
            if big.outcomes[outcome] and outcome != O_NONE:
                self._counts[OUTCOME_INDEX[outcome]] += big.outcomes[outcome]
            big.outcomes[outcome] = 0

    cdef object _scan(self, const char *d, Py_ssize_t n):
        cdef bint bom = self._first
        cdef Py_ssize_t i = 0, line_end, rest, value_start = 0, value_end = 0, fields = 0
        cdef tok_edits e
        cdef int outcome
        self._first = False
        if tok_next_candidate(d, n, 0) < 0:
            return None
        if bom and n >= 3 and memcmp(d, b"\xef\xbb\xbf", 3) == 0:
            i = 3
        while i < n:  # the data fields (lines end with \r\n, \r or \n)
            line_end = tok_line_end(d, i, n)
            if line_end < 0:
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
            outcome, rewritten = rewrite_event(PyBytes_FromStringAndSize(d, n), bom,
                                               tok_py_rules(self._rules))
        else:
            outcome = tok_usage_edits(self._rules, <const unsigned char *>d + value_start,
                                      value_end - value_start, &e,
                                      _object_memo(self) if self._rules.single_path else NULL)
            rewritten = None
            if outcome == O_REWRITTEN:
                rewritten = tok_apply_edits(d, n, value_start, &e)
        if outcome != O_NONE:
            self._counts[OUTCOME_INDEX[outcome]] += 1
        return rewritten

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
        if type(chunk) is not bytes:
            chunk = payload_bytes(chunk, "chunk")
        if not tok_busy_enter(self, &self._busy):  # under a critical section without the GIL
            raise in_use("UsageRelay")
        try:
            return self._feed(chunk)
        finally:
            if self._piece_cap > KEEP_PIECES:  # kept small between reads
                PyMem_Free(self._pieces)
                self._pieces, self._piece_cap = NULL, 0
            tok_busy_leave(self, &self._busy)  # last: the next call may start at once

    cdef int _drop_pending(self) except -1:
        self._pend_len = 0
        if self._pend_cap > KEEP_FREED:
            PyMem_Free(self._pend)
            self._pend, self._pend_cap = NULL, 0
        return 0

    cdef object _feed(self, bytes chunk):
        cdef const char *d = PyBytes_AS_STRING(chunk)
        cdef Py_ssize_t n = PyBytes_GET_SIZE(chunk)
        cdef Py_ssize_t pos = 0, copied = 0, end, count = 0, total, k, hit
        cdef Py_ssize_t ends = 0, last = -1, scanned = -1  # what tok_scan_events found from scanned
        cdef Py_ssize_t hold_from = -1  # the chunk's tail from here waits for more
        cdef bint has_cr, clean, drop_pending = False
        cdef bint holding = self._pend_len > 0  # an event started in an earlier chunk
        cdef uint64_t word
        cdef bytes result, piece
        cdef char *out
        cdef BigEvent big
        if n == 0:
            return b""
        clean = (self._pend_len == 0 and self._big is None and self._line_start
                 and n >= 2 and d[n - 1] == 10 and d[n - 2] == 10)
        if clean:
            # after a "usage":null event, the next is tried as one before any scan: its object
            # check reads it (as below); a stream without them pays one test
            if self._nulls and n >= 16:
                memcpy(&word, d + n - 8, 8)  # the last 8 bytes
                if word == _NULL_END and self._null_usage_event(d, n):
                    return chunk
            hit = tok_scan_events(d, n, 1, &ends, &last)
            if hit < 0:
                self._cr = False  # complete events, no CR, no usage key: the chunk itself
                self._first = False
                self._counts[N_EVENTS] += ends
                if n > self._max:
                    self._count_oversized(d, n)
                return chunk
            if d[hit] != 13 and self._null_usage_event(d, n):
                return chunk
        has_cr = memchr(d, 13, n) != NULL
        keep = []  # rewritten events the pieces point into
        hit = -1  # the next offset where usage may be; events before it need no scan
        while pos < n:
            if self._big is not None:  # inside an event too large to hold
                big = self._big
                piece = _forwarded(big.feed(d, pos, n, &end), d, pos, n, end)
                self._end_big(big)
                keep.append(piece)
                self._add(&count, d + copied, pos - copied)
                self._add(&count, PyBytes_AS_STRING(piece), PyBytes_GET_SIZE(piece))
                if end < 0:
                    copied = pos = n
                    break
                self._big = None
                self._counts[N_EVENTS] += 1
                self._line_start, self._cr = True, d[end - 1] == 13
                copied = pos = end
                continue
            if self._cr and not holding and d[pos] == 10:
                pos += 1  # the LF of the CRLF that ended the last event: out with it
                self._cr = False
                continue
            if not holding and not has_cr:
                if hit < pos and not self._cr and self._line_start:
                    end = self._next_null_event(d, pos, n)
                    if end >= 0:  # out as it came, as _event would send it
                        pos = end
                        continue
                if hit < pos:
                    # one pass: the next usage key, or, when there is none, the events that
                    # end in the rest and its last blank line
                    hit = tok_scan_events(d + pos, n - pos, 0, &ends, &last)
                    hit = n if hit < 0 else pos + hit
                    scanned = pos
                if hit == n:  # no usage key in the rest: out to its last blank line
                    if scanned != pos:  # the rest is shorter than the pass: scan it again
                        tok_scan_events(d + pos, n - pos, 0, &ends, &last)
                        scanned = pos
                    end = pos + last + 2 if last >= 0 else (
                        pos + 1 if self._line_start and not self._cr and d[pos] == 10 else -1)
                    if end > pos:
                        # the pairs of the rest all lie before its last one's end: the same
                        # count as over d[pos:end]
                        self._counts[N_EVENTS] += ends
                        if end - pos > self._max:
                            self._count_oversized(d + pos, end - pos)
                        self._line_start, self._cr, self._first = True, False, False
                        pos = end
                        if pos == n:
                            break
            end = self._next_boundary(d, pos, n, has_cr)
            if end < 0:
                self._add(&count, d + copied, pos - copied)
                copied = pos
                if (self._pend_len if holding else 0) + n - pos >= self._max:
                    # it will end up larger: scanned as it streams from here
                    big = self._big = self._start_big()
                    self._line_start, self._cr = True, False
                    if holding:
                        holding = False
                        piece = _forwarded(big.feed(self._pend, 0, self._pend_len, &end),
                                           self._pend, 0, self._pend_len, end)  # no end in it
                        self._end_big(big)
                        keep.append(piece)
                        self._add(&count, PyBytes_AS_STRING(piece), PyBytes_GET_SIZE(piece))
                        self._drop_pending()
                    continue  # the rest of this read through the scan
                hold_from = pos
                copied = pos = n
                break
            if holding:
                holding = False
                self._add(&count, d + copied, pos - copied)
                total = self._pend_len + end - pos
                if total - (d[end - 1] == 10 and end - 2 >= pos and d[end - 2] == 13) \
                        > self._max:  # too large to hold: scanned without joining it up
                    self._counts[N_EVENTS] += 1
                    big = self._start_big()
                    piece = _forwarded(big.feed(self._pend, 0, self._pend_len, &k), self._pend, 0,
                                       self._pend_len, k)
                    keep.append(piece)
                    self._add(&count, PyBytes_AS_STRING(piece), PyBytes_GET_SIZE(piece))
                    piece = _forwarded(big.feed(d, pos, n, &end), d, pos, n, end)
                    self._end_big(big)
                    keep.append(piece)
                    self._add(&count, PyBytes_AS_STRING(piece), PyBytes_GET_SIZE(piece))
                    self._line_start, self._cr = True, d[end - 1] == 13
                else:
                    self._hold(d + pos, end - pos)
                    rewritten = self._event(self._pend, self._pend_len)
                    if rewritten is None:
                        self._add(&count, self._pend, self._pend_len)
                    else:
                        keep.append(rewritten)
                        self._add(&count, PyBytes_AS_STRING(rewritten),
                                  PyBytes_GET_SIZE(rewritten))
                drop_pending = True
                copied = end
            elif not has_cr and hit < end and self._null_usage_event(d + pos, end - pos):
                pass  # its usage key ends it as "usage":null: out as it came, as _event would
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
            self._drop_pending()
        if hold_from >= 0:
            self._hold(d + hold_from, n - hold_from)
        return result

    def close(self):
        """The rest: an incomplete last event, processed as if its blank line had come."""
        if not tok_busy_enter(self, &self._busy):  # under a critical section without the GIL
            raise in_use("UsageRelay")
        try:
            return self._close()
        finally:
            tok_busy_leave(self, &self._busy)

    cdef object _close(self):
        cdef BigEvent big = self._big
        event = PyBytes_FromStringAndSize(self._pend, self._pend_len)
        self._drop_pending()
        self._big = None
        self._line_start, self._cr = True, False
        if big is not None:
            self._counts[N_EVENTS] += 1
            rest = big.finish()
            self._end_big(big)
            return rest
        if not event:
            return event
        if event[0] != 10 and event[0] != 13:
            self._counts[N_EVENTS] += 1
        # An unfinished last line still counts as a field: add a line end to read it and
        # take it off again, so the bytes forwarded are exactly the bytes received.
        ended = event if event.endswith((b"\n", b"\r")) else event + b"\n"
        rewritten = self._scan(PyBytes_AS_STRING(ended), PyBytes_GET_SIZE(ended))
        if rewritten is None:
            return event
        return rewritten if ended is event else rewritten[:len(rewritten) - 1]
