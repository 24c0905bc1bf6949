# cython: language_level=3
"""The WHATWG event-stream decoder: the Cython twin of ``_events_py``.

Lines are found with ``memchr`` over the raw chunk (``tok_line_end``, shared with the relay);
the field rules are the Python twin's, and ``Event`` is its type.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE

from tokcore._args import payload_view
from tokcore._events_py import Event

cdef extern from "_ssescan.h":
    Py_ssize_t tok_line_end(const char *p, Py_ssize_t i, Py_ssize_t n) noexcept nogil


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
            line_end = tok_line_end(d, i, n)
            if line_end < 0:
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
