# cython: language_level=3
# cython: freethreading_compatible=True
"""The WHATWG event-stream decoder: the Cython twin of ``_events_py``.

Lines are found with ``memchr`` over the raw chunk (``tok_line_end``, shared with the relay)
and their fields read in place: a line is copied only when it spans chunks. The rules, the
bound on what is held, ``Event`` and ``EventTooLarge`` are the Python twin's.
"""

from cpython.mem cimport PyMem_Free, PyMem_Realloc
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport int64_t
from libc.string cimport memchr, memcmp, memcpy

from tokcore._freethreading cimport (
    tok_busy, tok_busy_enter, tok_busy_leave, tok_cs, tok_cs_end, tok_idle_begin,
)

from tokcore._args import Bound, in_use, payload_view
from tokcore.stream._events_py import (
    DEFAULT_MAX_EVENT_BYTES, Event, EventTooLarge, event_too_large,
)
from tokcore.stream._events_py import EventDecoder as _PyEventDecoder

cdef extern from "_ssescan.h":
    Py_ssize_t tok_line_end(const char *p, Py_ssize_t i, Py_ssize_t n) noexcept nogil

cdef extern from "Python.h":
    const Py_ssize_t PY_SSIZE_T_MAX
    long long PyLong_AsLongLongAndOverflow(object o, int *overflow) except? -1

cdef object _DEFAULT_LIMIT = DEFAULT_MAX_EVENT_BYTES
cdef long long DEFAULT_LIMIT = DEFAULT_MAX_EVENT_BYTES


cdef object _bound_limit(tuple args, dict kwargs):
    """``max_event_bytes`` bound and checked by the Python twin's ``__init__``."""
    bound = Bound()
    _PyEventDecoder.__init__(bound, *args, **kwargs)
    return bound.values[0]


# a byte buffer of the decoder's (its unfinished line, its data): C memory, so that a
# decoder costs no Python object to make, and a buffer emptied is not freed unless large
ctypedef struct Buf:
    char *p
    Py_ssize_t len, cap

cdef enum:
    KEEP_FREED = 1 << 16  # a buffer larger than this is freed when it empties


cdef int _append(Buf *buf, const char *p, Py_ssize_t n, Py_ssize_t bound) except -1:
    """Add ``p[:n]``; a buffer grows by an eighth (as bytearray does: amortised O(1)), never
    past what the bound lets it hold unless ``n`` itself does."""
    cdef Py_ssize_t need = buf.len + n, cap
    cdef char *grown
    if n <= 0:  # (an empty buffer has no memory: memcpy must not see its NULL)
        return 0
    if need > buf.cap:
        cap = need + (need >> 3) + 64 if need < PY_SSIZE_T_MAX // 2 else need
        cap = min(cap, max(need, bound))
        grown = <char *>PyMem_Realloc(buf.p, <size_t>cap)
        if grown == NULL:
            raise MemoryError()
        buf.p, buf.cap = grown, cap
    memcpy(buf.p + buf.len, p, <size_t>n)
    buf.len = need
    return 0


cdef inline void _empty(Buf *buf) noexcept:
    buf.len = 0
    if buf.cap > KEEP_FREED:
        PyMem_Free(buf.p)
        buf.p, buf.cap = NULL, 0


cdef class EventDecoder:
    """Bytes in, ``Event`` objects out, by the WHATWG HTML event-stream parsing rules.

    ``id`` is the last event ID in force when the event was dispatched (None until an
    ``id`` field sets one); ``retry`` is the reconnection time set by a ``retry`` field of
    this event, else None. One decoder is one stream's state: a call made while another call
    on it is running (another thread's) raises ``RuntimeError``.
    """

    cdef Buf _line  # an unfinished line
    cdef Buf _data  # the data buffer: each data value and a LF
    cdef bytes _type  # the event type buffer
    cdef object _last_id, _id_before, _retry, _limit
    cdef Py_ssize_t _max  # the bound, capped at what a size can be
    cdef int64_t _offset  # bytes fed so far
    cdef bint _started, _cr, _skipping, _skip_line_start, _closed
    cdef tok_busy _busy  # a call is running: checked and set with no Python call between

    def __cinit__(self):  # (Cython passes it no arguments: it takes none but self)
        self._line.p = self._data.p = NULL
        self._type = b""

    def __dealloc__(self):
        PyMem_Free(self._line.p)
        PyMem_Free(self._data.p)

    def __init__(self, *args, **kwargs):
        cdef long long value = DEFAULT_LIMIT
        cdef int overflow = 0
        # a plain max_event_bytes (an exact int in range) is checked here; anything else is
        # bound and checked by the Python twin's __init__ (the one signature and its errors)
        limit = _DEFAULT_LIMIT
        if args or kwargs:
            limit = kwargs.get("max_event_bytes")
            if args or len(kwargs) > 1 or type(limit) is not int:
                value = -1
            else:
                value = PyLong_AsLongLongAndOverflow(limit, &overflow)
            if overflow or value < 1:
                limit = _bound_limit(args, kwargs)
                value = PY_SSIZE_T_MAX if limit > PY_SSIZE_T_MAX else limit
        # re-initialised while a call runs (a hook inside feed, another thread), the decoder
        # would change under that call: refused, as a call is
        if not tok_busy_enter(self, &self._busy):
            raise in_use("EventDecoder")
        self._limit = limit
        self._max = <Py_ssize_t>min(value, <long long>PY_SSIZE_T_MAX)
        _empty(&self._line)
        _empty(&self._data)
        self._type = b""
        self._last_id = self._id_before = self._retry = None
        self._started = self._cr = self._skipping = self._skip_line_start = False
        self._closed = False
        self._offset = 0
        tok_busy_leave(self, &self._busy)

    @property
    def pending_bytes(self):
        """Bytes held of the event being decoded (at most ``max_event_bytes``)."""
        cdef tok_cs cs
        cdef Py_ssize_t held
        tok_idle_begin(&cs, self, &self._busy)  # no GIL: after a call running elsewhere
        held = self._held()
        tok_cs_end(&cs)
        return held

    cdef inline Py_ssize_t _held(self) noexcept:
        return self._line.len + self._data.len + PyBytes_GET_SIZE(self._type)

    def feed(self, chunk):
        if type(chunk) is not bytes:
            chunk = bytes(payload_view(chunk, "chunk"))
        if not tok_busy_enter(self, &self._busy):  # under a critical section without the GIL
            raise in_use("EventDecoder")
        try:
            if self._closed:
                raise ValueError("feed() after close()")
            return self._feed(<bytes>chunk)
        finally:
            tok_busy_leave(self, &self._busy)

    def close(self):
        """End of stream: an unfinished last event is discarded, as the rules say."""
        if not tok_busy_enter(self, &self._busy):  # under a critical section without the GIL
            raise in_use("EventDecoder")
        try:
            self._closed = True
            self._drop()
            self._skipping = False
            return []
        finally:
            tok_busy_leave(self, &self._busy)

    cdef list _feed(self, bytes chunk):
        cdef const char *d = PyBytes_AS_STRING(chunk)
        cdef Py_ssize_t n = PyBytes_GET_SIZE(chunk), i = 0, end, room
        cdef int64_t offset = self._offset
        cdef list events = []
        cdef list dropped = None
        if n == 0:
            return events
        self._offset += n
        if self._cr and d[0] == 10:
            i = 1  # the LF of a CRLF split across chunks
        self._cr = False
        while i < n:
            end = tok_line_end(d, i, n)
            if end < 0:  # an unfinished line
                if self._skipping:
                    self._skip_line_start = False
                else:
                    room = self._max - self._held()
                    if n - i > room:
                        dropped = self._dropped(dropped, offset + i + room)
                        self._skip_line_start = False
                    else:
                        _append(&self._line, d + i, n - i, self._max)
                break
            if self._skipping:
                if end == i and self._skip_line_start:
                    self._skipping = False  # the blank line that ends the dropped event
                self._skip_line_start = True
            else:
                room = self._max - self._held()
                if end - i > room:
                    dropped = self._dropped(dropped, offset + i + room)
                    self._skip_line_start = True  # this line ends here
                elif self._line.len:
                    _append(&self._line, d + i, end - i, self._max)
                    self._field(self._line.p, self._line.len, events)
                    _empty(&self._line)
                else:
                    self._field(d + i, end - i, events)
            if d[end] == 13:
                if end + 1 == n:
                    self._cr = True  # a LF may still follow in the next chunk
                    i = n
                elif d[end + 1] == 10:
                    i = end + 2
                else:
                    i = end + 1
            else:
                i = end + 1
        if dropped is not None:
            raise event_too_large(self._limit, dropped, events)
        return events

    cdef list _dropped(self, list dropped, int64_t at):
        if dropped is None:
            dropped = []
        dropped.append(at)
        self._drop()
        return dropped

    cdef int _drop(self) except -1:
        """Forget the event being decoded (as if it never came) and skip the rest of it."""
        _empty(&self._line)
        _empty(&self._data)
        self._type = b""
        self._retry = None
        self._last_id = self._id_before
        self._started = True
        self._skipping = True
        return 0

    cdef int _field(self, const char *p, Py_ssize_t n, list events) except -1:
        """One complete line, ``p[:n]``; ``p`` may point into ``_line``, never ``_data``."""
        cdef const char *colon
        cdef const char *value
        cdef Py_ssize_t name_len, value_len = 0, k
        if not self._started:
            self._started = True
            if n >= 3 and memcmp(p, b"\xef\xbb\xbf", 3) == 0:
                p += 3
                n -= 3
        if n == 0:
            return self._dispatch(events)
        if p[0] == 58:  # ":" a comment
            return 0
        colon = <const char *>memchr(p, 58, <size_t>n)
        if colon is NULL:
            name_len = n
            value = p + n
        else:
            name_len = colon - p
            value = colon + 1
            value_len = n - name_len - 1
            if value_len and value[0] == 32:
                value += 1
                value_len -= 1
        if name_len == 4 and memcmp(p, b"data", 4) == 0:
            _append(&self._data, value, value_len, self._max)
            _append(&self._data, b"\n", 1, self._max)
        elif name_len == 5 and memcmp(p, b"event", 5) == 0:
            self._type = PyBytes_FromStringAndSize(value, value_len)
        elif name_len == 2 and memcmp(p, b"id", 2) == 0:
            if memchr(value, 0, <size_t>value_len) is NULL:
                self._last_id = PyUnicode_DecodeUTF8(value, value_len, "replace")
        elif name_len == 5 and memcmp(p, b"retry", 5) == 0 and value_len:
            for k in range(value_len):
                if not 48 <= value[k] <= 57:
                    return 0  # not only ASCII digits: ignored
            try:
                self._retry = int(PyBytes_FromStringAndSize(value, value_len))
            except ValueError:  # more digits than int() converts: ignored
                pass
        return 0

    cdef int _dispatch(self, list events) except -1:
        cdef Py_ssize_t size = self._data.len
        if size:
            data = PyUnicode_DecodeUTF8(self._data.p, size - 1, "replace")
            if PyBytes_GET_SIZE(self._type):
                kind = PyUnicode_DecodeUTF8(PyBytes_AS_STRING(self._type),
                                            PyBytes_GET_SIZE(self._type), "replace")
            else:
                kind = "message"
            events.append(Event(kind, data, self._last_id, self._retry))
            _empty(&self._data)
        self._type = b""
        self._retry = None
        self._id_before = self._last_id
        return 0


def iter_events(chunks, *, max_event_bytes=DEFAULT_MAX_EVENT_BYTES):
    """Decode an iterable of byte chunks into events. An event over ``max_event_bytes`` ends
    the iteration with ``EventTooLarge``, once the events its chunk completed are yielded."""
    return _iterate(EventDecoder(max_event_bytes=max_event_bytes), chunks)


def _iterate(EventDecoder decoder, chunks):
    for chunk in chunks:
        try:
            events = decoder.feed(chunk)
        except EventTooLarge as exc:
            yield from exc.events
            raise
        yield from events
    yield from decoder.close()
