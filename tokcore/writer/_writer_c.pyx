# cython: language_level=3
# cython: freethreading_compatible=True
"""The stream writer: the Cython twin of ``_writer_py``.

A shape's programs are turned once into C op arrays (``_Frame``, kept on the shape); a call
checks its values in C and runs its frame's ops into a byte buffer of the writer's, strings
escaped by ``_escape.h`` (plain runs copied 16 or 32 bytes a step). ``text(s)`` of choice 0
writes the frame's bytes before and after the text, made once per writer, around the copy.
A value the C checks do not take (a wrong type, a lone surrogate, a slot the frame has not,
an int too large for a double: every error, and any value that is not of an exact built-in
type, a subclass whose methods could run Python code while C holds the lists' lengths and
items) sends the whole call to the Python twin, on a writer of its own with this one's
state: the same result, or the same exception with the same message, in the Python twin's
order of checks (its StreamWriter docstring). The C path raises nothing of its own.
"""

cimport cython
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.mem cimport PyMem_Free, PyMem_Malloc, PyMem_Realloc
from cpython.object cimport Py_TYPE, PyObject, PyTypeObject
from cpython.ref cimport Py_DECREF, Py_XDECREF
from libc.stdint cimport INT64_MAX, INT64_MIN, uint64_t
from libc.string cimport memcpy

from tokcore._freethreading cimport tok_busy, tok_busy_enter, tok_busy_leave

import sys
import time

from tokcore._args import in_use
from tokcore._kernels import unknown_kernel
from tokcore.writer import _writer_py as _py
from tokcore.writer._writer_rules import (
    DONE_FRAMES, GROUP, NULLABLE, SLOT, STYLES, ZERO_DETAILS,
)
from tokcore.writer._writer_shape import StreamShape

cdef extern from "Python.h":
    const Py_ssize_t PY_SSIZE_T_MAX
    int PyUnicode_KIND(object o)
    void *PyUnicode_DATA(object o)
    Py_ssize_t PyUnicode_GET_LENGTH(object o)
    bint PyUnicode_IS_ASCII(object o)
    bint PyUnicode_CheckExact(object o)
    bint PyLong_CheckExact(object o)
    bint PyFloat_CheckExact(object o)
    bint PyTuple_Check(object o)
    bint PyTuple_CheckExact(object o)
    bint PyList_Check(object o)
    bint PyList_CheckExact(object o)
    bint PyBytes_CheckExact(object o)
    double PyFloat_AS_DOUBLE(object o)
    double PyLong_AsDouble(object o)  # (its error checked and cleared by the caller)
    tuple PyList_AsTuple(object o)
    PyObject *PyErr_Occurred()
    PyObject *PyErr_GetHandledException()  # (a new reference, or NULL)
    void PyErr_Clear()
    long long PyLong_AsLongLongAndOverflow(object o, int *overflow) except? -1
    Py_ssize_t PyTuple_GET_SIZE(object o)
    Py_ssize_t PyList_GET_SIZE(object o)
    PyObject *PyTuple_GET_ITEM(object o, Py_ssize_t i)
    PyObject *PyList_GET_ITEM(object o, Py_ssize_t i)
    PyObject *PyDict_GetItem(object d, object key)

cdef extern from "_escape.h":
    int tok_esc_kernel
    int TOK_ESC_SCALAR, TOK_ESC_VEC, TOK_ESC_AVX2
    const char *TOK_ESC_VECTOR
    bint TOK_CPU_X86
    Py_ssize_t tok_esc_scan(const unsigned char *p, Py_ssize_t n, int dele) noexcept nogil
    Py_ssize_t tok_esc_bound(int kind, Py_ssize_t n, int ascii) noexcept nogil
    Py_ssize_t tok_esc_write(char *out, int kind, const void *data, Py_ssize_t n,
                             int ascii) noexcept nogil
    int tok_fmt_i64(char *o, long long v) noexcept nogil
    void tok_copy(char *dst, const char *src, Py_ssize_t n) noexcept nogil
    Py_ssize_t tok_fmt_byte_list(char *o, const unsigned char *p, Py_ssize_t n,
                                 const char *sep, Py_ssize_t nsep) noexcept nogil
    int tok_fmt_double(char *o, double v, int floats, int literal) except? -1
    uint64_t tok_dbl_g[1234]
    void tok_utf8_tables() noexcept nogil
    int tok_dbl_ready
    int TOK_DBL_K_MIN, TOK_DBL_K_MAX

cdef extern from "_cpu.h":
    unsigned TOK_CPU_AVX2
    bint tok_cpu_has(unsigned wanted) noexcept nogil

# --- the kernels (tokcore/_kernels.py's vocabulary)
_VECTOR = TOK_ESC_VECTOR.decode()
_KERNELS = tuple(dict.fromkeys(
    ("scalar", _VECTOR) + (("avx2",) if TOK_CPU_X86 and tok_cpu_has(TOK_CPU_AVX2) else ())))
_CODES = {"scalar": TOK_ESC_SCALAR, _VECTOR: TOK_ESC_VEC if _VECTOR != "scalar" else TOK_ESC_SCALAR,
          "avx2": TOK_ESC_AVX2}


def _kernels():
    """The kernels the string escape runs on this CPU, the plainest first and the best last."""
    return _KERNELS


def _kernel():
    """The kernel in use."""
    for name in _KERNELS:
        if _CODES[name] == tok_esc_kernel:
            return name
    return "scalar"


def _use_kernel(name):
    """Escape with the kernel ``name`` (one of ``_kernels()``; for the tests and benchmarks);
    returns the name of the one in use before."""
    global tok_esc_kernel
    if name not in _KERNELS:
        raise unknown_kernel(name, _KERNELS)
    before = _kernel()
    tok_esc_kernel = _CODES[name]
    return before


tok_utf8_tables()
_use_kernel(_KERNELS[len(_KERNELS) - 1])


def _fill_powers_of_ten():
    """The table of the shortest-digits conversion (_escape.h): for each decimal exponent k,
    g = floor(10^-k * 2^-r) + 1 with 2^125 <= g < 2^126, exact (Python's ints), as two
    63-bit halves."""
    cdef object e, r, num, den, g  # (exact: Python's ints)
    cdef uint64_t g1, g0
    cdef int k
    for k in range(TOK_DBL_K_MIN, TOK_DBL_K_MAX + 1):
        e = -k
        r = ((e * 913124641741) >> 38) - 125  # floor(log2(10^e)) - 125
        num = 10 ** e if e >= 0 else 1
        den = 10 ** -e if e < 0 else 1
        if r >= 0:
            den <<= r
        else:
            num <<= -r
        g = num // den + 1
        assert 1 << 125 <= g < 1 << 126
        g1 = g >> 63
        g0 = g & ((1 << 63) - 1)
        _set_power(k - TOK_DBL_K_MIN, g1, g0)
    _powers_ready()


cdef void _set_power(int i, uint64_t g1, uint64_t g0) noexcept:
    tok_dbl_g[2 * i] = g1
    tok_dbl_g[2 * i + 1] = g0


cdef void _powers_ready() noexcept:
    global tok_dbl_ready
    tok_dbl_ready = 1


_fill_powers_of_ten()


def _double(double value, int floats=1):
    """One double as the writer writes it (0 repr, 1 pydantic-core/orjson, 2 msgspec), for
    the tests that compare every double with repr and the serializers."""
    cdef char out[40]
    cdef int n = tok_fmt_double(out, value, floats, 0)
    return out[:n].decode("ascii")

# --- the slots, as _writer_rules numbers them
cdef enum:
    S_ID, S_MODEL, S_CREATED, S_FINGERPRINT, S_ROLE, S_TEXT, S_INDEX, S_TOKEN_IDS,
    S_FINISH, S_STOP, S_TOOL_INDEX, S_TOOL_ID, S_TOOL_NAME, S_ITEM_ID, S_CONTENT_INDEX,
    S_SEQ, S_PROMPT, S_COMPLETION, S_TOTAL, S_CACHED, S_REASONING, S_LP_TOKEN, S_LP_LOGPROB,
    S_LP_BYTES, S_LP_OFFSET, S_TOP_TOKEN, S_TOP_LOGPROB, S_TOP_BYTES, S_PROMPT_IDS,
    G_LOGPROBS, G_USAGE, G_TOP, NVALUES

cdef enum:
    OP_CONST, OP_SLOT, OP_MEMBER, OP_LOOP, OP_NEXT

assert [SLOT[name] for name in ("id", "text", "sequence_number", "top_bytes",
                                "prompt_token_ids")] == [
    S_ID, S_TEXT, S_SEQ, S_TOP_BYTES, S_PROMPT_IDS]
assert (GROUP["logprobs"], GROUP["usage"], GROUP["top_logprobs"]) == (G_LOGPROBS, G_USAGE, G_TOP)

cdef uint64_t NULLABLE_MASK = 0
for _name in NULLABLE:
    NULLABLE_MASK |= (<uint64_t>1) << SLOT[_name]
cdef enum:
    N_STEP_SLOTS = 11
    KEEP_FREED = 1 << 16  # a buffer larger than this is freed after the call
# a step's own values, in the Python twin's order of checks
cdef int STEP_SLOTS[N_STEP_SLOTS]
for _k, _slot in enumerate((S_TEXT, S_INDEX, S_TOKEN_IDS, S_PROMPT_IDS, S_FINISH, S_STOP,
                            S_TOOL_INDEX, S_TOOL_ID, S_TOOL_NAME, S_ITEM_ID, S_CONTENT_INDEX)):
    STEP_SLOTS[_k] = _slot


ctypedef struct Op:
    int code
    int a          # slot or group (SLOT, MEMBER), level (LOOP, NEXT)
    int b          # omit (MEMBER), keyed (LOOP)
    int c          # the op to go on at (MEMBER, LOOP: past; NEXT: the loop's first)
    const char *p  # the constant (CONST), the key (MEMBER), the separator (NEXT)
    Py_ssize_t n
    const char *q  # what None writes (MEMBER)
    Py_ssize_t m


cdef class _Frame:
    """One frame's program as C ops (its bytes are the Program's, which it keeps)."""
    cdef Op *ops
    cdef int n
    cdef bint counts
    cdef uint64_t mask  # the slots and groups it has
    cdef uint64_t nullable  # the slots that may be None in it (NULLABLE, its omitted text)
    cdef const char *sep
    cdef Py_ssize_t nsep
    cdef object program

    def __dealloc__(self):
        PyMem_Free(self.ops)


cdef _Frame _make_frame(program):
    cdef _Frame f = _Frame.__new__(_Frame)
    cdef Op *op
    cdef bytes key
    f.program = program
    f.n = len(program.ops)
    f.ops = <Op *>PyMem_Malloc(sizeof(Op) * max(f.n, 1))
    if f.ops == NULL:
        raise MemoryError()
    f.counts = program.counts
    f.sep = PyBytes_AS_STRING(program.sep)
    f.nsep = PyBytes_GET_SIZE(program.sep)
    f.mask = 0
    for name in program.slots:
        f.mask |= (<uint64_t>1) << (SLOT[name] if name in SLOT else GROUP[name])
    f.nullable = NULLABLE_MASK
    for name in program.omitted:
        f.nullable |= (<uint64_t>1) << SLOT[name]
    for i, item in enumerate(program.ops):
        op = &f.ops[i]
        op.code = item[0]
        op.a = op.b = op.c = 0
        op.p = op.q = NULL
        op.n = op.m = 0
        if op.code == OP_CONST:
            op.p, op.n = PyBytes_AS_STRING(item[1]), PyBytes_GET_SIZE(item[1])
        elif op.code == OP_SLOT:
            op.a = item[1]
        elif op.code == OP_MEMBER:
            op.p, op.n = PyBytes_AS_STRING(item[1]), PyBytes_GET_SIZE(item[1])
            op.a, op.b = item[2], item[3]
            op.q, op.m = PyBytes_AS_STRING(item[4]), PyBytes_GET_SIZE(item[4])
            op.c = item[5]
        elif op.code == OP_LOOP:
            op.a, op.c, op.b = item[1], item[2], item[3]
        else:
            op.a, op.c = item[1], item[2]
            op.p, op.n = PyBytes_AS_STRING(item[3]), PyBytes_GET_SIZE(item[3])
    return f


cdef class _Compiled:
    """A shape's frames as C ops, its style's rules and its done frame (made once, kept on
    the shape)."""
    cdef dict frames
    cdef _Frame text, reasoning, tool_args, finish, usage, done
    cdef _Frame finish_reasoning, finish_tool_args  # (a finishing step of those kinds)
    cdef int ascii, floats, literal
    cdef bint created_float  # the probes write created as a float
    cdef bint zero_details  # a usage count not given is written 0 (ZERO_DETAILS)

    cdef _Frame get(self, name):
        return <_Frame>self.frames.get(name)


cdef _Compiled _compiled(shape):
    cdef _Compiled c = shape._compiled
    if c is not None:
        return c
    c = _Compiled.__new__(_Compiled)
    c.frames = {name: _make_frame(program) for name, program in shape._programs.items()}
    c.text = c.get("text")
    c.reasoning = c.get("reasoning")
    c.tool_args = c.get("tool_args")
    c.finish = c.get("finish")
    c.finish_reasoning = c.get("finish_reasoning")
    c.finish_tool_args = c.get("finish_tool_args")
    c.usage = c.get("usage")
    frame = DONE_FRAMES.get(shape.api)
    c.done = None if frame is None else c.get(frame)
    rules = STYLES[shape.style]
    c.ascii, c.floats, c.literal = rules.ascii, rules.floats, rules.nonfinite_literal
    c.created_float = shape._created_float
    c.zero_details = shape.api in ZERO_DETAILS
    shape._compiled = c  # (two writers made at once may both compile: one is kept)
    return c


# one frame's values: the arguments as given (borrowed), their ints read
ctypedef struct Args:
    PyObject *v[NVALUES]
    long long i[NVALUES]


cdef class _Slow(Exception):
    """A value the C checks do not take: the call goes to the Python twin."""


# a Usage tuple's counts by place: their slots
cdef int _USAGE_SLOT[4]
_USAGE_SLOT[0], _USAGE_SLOT[1], _USAGE_SLOT[2], _USAGE_SLOT[3] = (
    S_PROMPT, S_COMPLETION, S_CACHED, S_REASONING)


# The C path takes the built-in types alone (str, int, float, list, tuple, bytes, None; the
# argument tuples of _writer_py, tuples with tuple's own methods), each checked by its exact
# type: no method of a value runs Python code while a call holds its lists' lengths and
# items. A value of another type (a subclass of one of those: an IntEnum, numpy.float64, a
# list that overrides __len__...) is _Slow: the whole call goes to the Python twin. The
# lists are read again where they are written (_item: a list shorter than when it was
# checked is _Slow too; a logprob entry is made a tuple, _as_tuple, and each field's type
# checked again where it is written), so that even code run by the garbage collector or
# another thread cannot make the C path read past them.
cdef PyTypeObject *_T_ENTRY = <PyTypeObject *>_py.TokenLogprob
cdef PyTypeObject *_T_TOP = <PyTypeObject *>_py.TopLogprob
cdef PyTypeObject *_T_USAGE = <PyTypeObject *>_py.Usage
cdef PyTypeObject *_T_STEP = <PyTypeObject *>_py.Step


cdef inline bint _is_tuple(object o) noexcept:
    """A tuple, or one of the argument tuples (tuple's methods: their items as stored)."""
    cdef PyTypeObject *t
    if PyTuple_CheckExact(o):
        return True
    t = Py_TYPE(o)
    return t == _T_ENTRY or t == _T_TOP or t == _T_USAGE or t == _T_STEP


cdef inline bint _is_int(object o) noexcept:
    return PyLong_CheckExact(o)  # (not bool, not a subclass)


cdef inline bint _int64(object o, long long *out) except -1:
    cdef int overflow = 0
    if not PyLong_CheckExact(o):
        return False
    out[0] = PyLong_AsLongLongAndOverflow(o, &overflow)
    return not overflow


cdef inline Py_ssize_t _seq_len(object o) noexcept:
    """The length of a list or tuple (_is_tuple), -1 for another type."""
    if _is_tuple(o):
        return PyTuple_GET_SIZE(o)
    if PyList_CheckExact(o):
        return PyList_GET_SIZE(o)
    return -1


cdef extern from *:
    """
    /* list[i] as a new reference; past the list's end as it is now, NULL with the
     * exception tok_list_short (_Slow) set. Without the GIL another thread may change the
     * list, so the item is taken under its lock. */
    static PyObject *tok_list_short = NULL;
    static inline PyObject *tok_list_item(PyObject *list, Py_ssize_t i) {
        PyObject *item;
    #ifdef Py_GIL_DISABLED
        item = PyList_GetItemRef(list, i);
        if (item == NULL) {
            PyErr_Clear();
            PyErr_SetNone(tok_list_short);
        }
    #else
        if (i < 0 || i >= PyList_GET_SIZE(list)) {
            PyErr_SetNone(tok_list_short);
            return NULL;
        }
        item = PyList_GET_ITEM(list, i);
        Py_INCREF(item);
    #endif
        return item;
    }
    """
    PyObject *tok_list_short
    object tok_list_item(object lst, Py_ssize_t i)


tok_list_short = <PyObject *>_Slow  # (the class lives as long as the module)


cdef inline object _item(object seq, Py_ssize_t i):
    """seq[i] of a list or tuple whose length was read (a tuple's items cannot change; a
    list shorter than that now is _Slow)."""
    if PyTuple_Check(seq):
        return <object>PyTuple_GET_ITEM(seq, i)
    return tok_list_item(seq, i)


cdef inline tuple _as_tuple(object item):
    """A logprob entry as a tuple: a list's items copied (PyList_AsTuple: no Python code),
    so they cannot change while written; another type (a list changed since its check):
    _Slow."""
    if PyTuple_Check(item):  # (its items as stored, whatever its type)
        return <tuple>item
    if PyList_CheckExact(item):
        return PyList_AsTuple(item)
    raise _Slow()


cdef inline PyObject *_at(tuple t, Py_ssize_t i) noexcept:
    """Field i of a logprob entry (borrowed), NULL past its end."""
    return PyTuple_GET_ITEM(t, i) if i < PyTuple_GET_SIZE(t) else NULL


cdef bint _ints_ok(object value) except -1:
    """A list or tuple of int64s, or bytes."""
    cdef Py_ssize_t n, k
    cdef long long v = 0
    if PyBytes_CheckExact(value):
        return True
    n = _seq_len(value)
    if n < 0:
        return False
    for k in range(n):
        if not _int64(_item(value, k), &v):
            return False
    return True


cdef inline bint _float_ok(object value) noexcept:
    """A float, or an int a double holds (the conversion checked here, where an error can
    still go to the Python twin)."""
    cdef double v
    if PyFloat_CheckExact(value):
        return True
    if not PyLong_CheckExact(value):
        return False
    v = PyLong_AsDouble(value)
    if v == -1.0 and PyErr_Occurred() != NULL:
        PyErr_Clear()
        return False
    return True


cdef bint _entry_ok(object entry, bint top, bint offset_needed) except -1:
    cdef Py_ssize_t n = _seq_len(entry), k, nt
    cdef long long v = 0
    if n < 2 or n > (3 if top else 5):
        return False
    if not PyUnicode_CheckExact(_item(entry, 0)) or not _float_ok(_item(entry, 1)):
        return False
    if n > 2 and _item(entry, 2) is not None and not _ints_ok(_item(entry, 2)):
        return False
    if top:
        return True
    if n > 3 and _item(entry, 3) is not None:
        tops = _item(entry, 3)
        nt = _seq_len(tops)
        if nt < 0:
            return False
        for k in range(nt):
            if not _entry_ok(_item(tops, k), True, False):
                return False
    if n > 4 and _item(entry, 4) is not None:
        if not _int64(_item(entry, 4), &v):
            return False
    elif offset_needed:
        return False
    return True


@cython.embedsignature(False)  # (the signature is the docstring's first line, as shown)
cdef class StreamWriter:
    """StreamWriter(shape, *, id, model, created=None, system_fingerprint=None, role='assistant', item_id=None)
--

One stream's frames as the server's own serializer writes them (the Python twin's
    docstring is the reference)."""

    cdef object _shape
    cdef _Compiled _comp
    cdef int _ascii, _floats, _literal
    cdef bytes _c_id, _c_model, _c_created, _c_role
    cdef object _c_fp  # bytes or None
    cdef object _c_item  # the current item id rendered, or None
    cdef object _item_text
    cdef long long _seq
    cdef tuple _init  # the constructor's arguments, for the Python twin's writer
    cdef bytes _head0, _tail0  # the text frame of choice 0 around its text (None: no such)
    cdef list _heads  # [(head, tail)] of choices 1.. as they are written (the same split)
    cdef tuple _counted  # a counting text frame of choice 0 around its number and text
    cdef bint _counted_text_first  # the text before the number in that frame
    cdef bint _counted_stale  # _counted to be made again (made, or the item changed, since)
    cdef _Frame _done  # the done frame (None: the API has none)
    cdef char *buf
    cdef Py_ssize_t len, cap
    cdef tok_busy _busy

    def __init__(self, shape, *, id, model, created=None, system_fingerprint=None,
                 role="assistant", item_id=None):
        # (arguments that do not bind never get here: tok_writer_init below gives the Python
        # twin's TypeError)
        cdef long long v = 0
        if not isinstance(shape, StreamShape):
            raise _py.bad_type("shape", "a StreamShape", shape)
        comp = _compiled(shape)
        if created is None:
            created = int(time.time())
        if not tok_busy_enter(self, &self._busy):
            raise in_use("StreamWriter")
        try:
            self._shape, self._comp = shape, comp
            self._ascii, self._floats, self._literal = comp.ascii, comp.floats, comp.literal
            self._c_id = self._render(id, "id")
            self._c_model = self._render(model, "model")
            if type(created) is not int or not _int64(created, &v):
                created = _py.check_int(created, "created")  # (a subclass: its value)
            self._c_created = _py.render_float(STYLES[shape.style], float(created)) \
                if comp.created_float else str(created).encode("ascii")
            self._c_fp = None if system_fingerprint is None else self._render(
                system_fingerprint, "system_fingerprint")
            self._c_role = self._render(role, "role")
            self._c_item = None if item_id is None else self._render(item_id, "item_id")
            self._item_text = item_id
            self._seq = 0
            self._init = (id, model, created, system_fingerprint, role)
            self._head0 = self._tail0 = None
            self._heads = []
            self._counted, self._counted_stale = None, True
            self._done = comp.done
            if comp.text is not None and not comp.text.counts:
                split = self._split_text(0)
                if split is not None:
                    self._head0, self._tail0 = split
        finally:
            tok_busy_leave(self, &self._busy)

    cdef bytes _render(self, object value, str what):
        """A constant's JSON string, rendered once (the Python twin's error for a value that
        is not a str, or holds a lone surrogate its style refuses)."""
        cdef Py_ssize_t n, w
        cdef int kind
        if not PyUnicode_CheckExact(value):  # (a subclass: the Python twin's rendering)
            return _py.render_str(STYLES[self._shape.style], _py.check_str(value, what), what)
        n = PyUnicode_GET_LENGTH(value)
        kind = PyUnicode_KIND(value)
        self.len = 0
        self._room(tok_esc_bound(kind, n, self._ascii))
        w = tok_esc_write(self.buf, kind, PyUnicode_DATA(value), n, self._ascii)
        if w < 0:
            self._reset()
            return _py.render_str(STYLES[self._shape.style], value, what)
        out = PyBytes_FromStringAndSize(self.buf, w)
        self._reset()
        return out

    def __dealloc__(self):
        PyMem_Free(self.buf)

    @property
    def shape(self):
        return self._shape

    @property
    def item_id(self):
        return self._item_text

    @item_id.setter
    def item_id(self, value):
        rendered = None if value is None else _py.render_str(
            STYLES[self._shape.style], _py.check_str(value, "item_id"), "item_id")
        if not tok_busy_enter(self, &self._busy):
            raise in_use("StreamWriter")
        self._c_item, self._item_text = rendered, value
        self._counted_stale = True  # (the item's id is in the split)
        tok_busy_leave(self, &self._busy)

    @property
    def sequence_number(self):
        return self._seq

    @sequence_number.setter
    def sequence_number(self, value):
        value = _py.check_int(value, "sequence_number")
        if not tok_busy_enter(self, &self._busy):
            raise in_use("StreamWriter")
        self._seq = value
        tok_busy_leave(self, &self._busy)

    # --- the buffer

    cdef inline int _room(self, Py_ssize_t extra) except -1:
        cdef Py_ssize_t need = self.len + extra, cap
        cdef char *grown
        if need <= self.cap:
            return 0
        if extra > PY_SSIZE_T_MAX // 2 - self.len:
            raise MemoryError()
        cap = max(need + (need >> 1), 256)
        grown = <char *>PyMem_Realloc(self.buf, <size_t>cap)
        if grown == NULL:
            raise MemoryError()
        self.buf, self.cap = grown, cap
        return 0

    cdef inline int _put(self, const char *p, Py_ssize_t n) except -1:
        if self.len + n > self.cap:
            self._room(n)
        tok_copy(self.buf + self.len, p, n)
        self.len += n
        return 0

    cdef inline int _put_int(self, long long v) except -1:
        self._room(24)
        self.len += tok_fmt_i64(self.buf + self.len, v)
        return 0

    cdef int _put_str(self, object s) except -1:
        """A str as a JSON string; a lone surrogate UTF-8 cannot hold is _Slow (the Python
        twin names it as the style's serializer does)."""
        cdef Py_ssize_t n = PyUnicode_GET_LENGTH(s), w
        cdef int kind = PyUnicode_KIND(s)
        self._room(tok_esc_bound(kind, n, self._ascii))
        w = tok_esc_write(self.buf + self.len, kind, PyUnicode_DATA(s), n, self._ascii)
        if w < 0:
            raise _Slow()
        self.len += w
        return 0

    cdef int _put_float(self, PyObject *p) except -1:
        """A logprob entry's float (NULL: past the entry's end)."""
        cdef double v = 0.0
        if p != NULL and PyFloat_CheckExact(<object>p):
            v = PyFloat_AS_DOUBLE(<object>p)
        elif p != NULL and PyLong_CheckExact(<object>p):  # an int: its double (_float_ok)
            v = PyLong_AsDouble(<object>p)
            if v == -1.0 and PyErr_Occurred() != NULL:
                PyErr_Clear()
                raise _Slow()
        else:
            raise _Slow()  # (an item of a list changed since its check)
        self._room(40)
        self.len += tok_fmt_double(self.buf + self.len, v, self._floats, self._literal)
        return 0

    cdef inline int _put_token(self, PyObject *p) except -1:
        """A logprob entry's token (NULL: past the entry's end)."""
        if p == NULL or not PyUnicode_CheckExact(<object>p):
            raise _Slow()  # (an item of a list changed since its check)
        return self._put_str(<object>p)

    cdef inline int _put_entry_ints(self, PyObject *p, _Frame f) except -1:
        """A logprob entry's bytes (NULL: past the entry's end), or null."""
        if p == NULL or <object>p is None:
            return self._put_null()
        return self._put_ints(<object>p, f)

    cdef int _put_ints(self, object value, _Frame f) except -1:
        cdef Py_ssize_t n, k
        cdef long long v = 0
        cdef const unsigned char *p
        if PyBytes_CheckExact(value):
            n = PyBytes_GET_SIZE(value)
            p = <const unsigned char *>PyBytes_AS_STRING(value)
            self._room(2 + n * (3 + f.nsep))
            self.len += tok_fmt_byte_list(self.buf + self.len, p, n, f.sep, f.nsep)
            return 0
        n = _seq_len(value)
        if n < 0:
            raise _Slow()  # (an entry's list changed since its check)
        self._put("[", 1)
        for k in range(n):
            if k:
                self._put(f.sep, f.nsep)
            if not _int64(_item(value, k), &v):
                raise _Slow()  # (the list changed since its check)
            self._put_int(v)
        self._put("]", 1)
        return 0

    cdef inline void _reset(self) noexcept:
        self.len = 0
        if self.cap > KEEP_FREED:
            PyMem_Free(self.buf)
            self.buf, self.cap = NULL, 0

    cdef bytes _take(self):
        out = PyBytes_FromStringAndSize(self.buf, self.len)
        self._reset()
        return out

    # --- one frame

    cdef int _check(self, _Frame f, Args *a, bint is_usage_frame) except -1:
        """The C checks of a frame's values (any doubt: _Slow)."""
        cdef int k, s
        cdef object value
        cdef long long v = 0
        cdef Py_ssize_t n, j
        cdef uint64_t bit
        for k in range(N_STEP_SLOTS):
            s = STEP_SLOTS[k]
            bit = (<uint64_t>1) << s
            if a.v[s] == NULL:
                if s == S_INDEX or s == S_TOOL_INDEX or s == S_CONTENT_INDEX:
                    a.i[s] = 0  # (their default)
                    continue
                if s == S_ITEM_ID and self._c_item is not None:
                    continue
                if f.mask & bit and not (f.nullable & bit):
                    raise _Slow()  # a value the frame needs
                continue
            value = <object>a.v[s]
            if s == S_INDEX or s == S_TOOL_INDEX or s == S_CONTENT_INDEX:
                if not _int64(value, &v):
                    raise _Slow()
                a.i[s] = v
                if not (f.mask & bit) and v != 0:
                    raise _Slow()
                continue
            if s == S_TOKEN_IDS or s == S_PROMPT_IDS:
                if not _ints_ok(value):
                    raise _Slow()
            elif s == S_STOP:
                if not (PyUnicode_CheckExact(value) or _int64(value, &v)):
                    raise _Slow()
            elif not PyUnicode_CheckExact(value):
                raise _Slow()
            if not (f.mask & bit):
                raise _Slow()
        if a.v[G_LOGPROBS] != NULL:
            value = <object>a.v[G_LOGPROBS]
            n = _seq_len(value)
            if n < 0 or not (f.mask & ((<uint64_t>1) << G_LOGPROBS)):
                raise _Slow()
            for j in range(n):
                if not _entry_ok(_item(value, j), False,
                                 f.mask & ((<uint64_t>1) << S_LP_OFFSET)):
                    raise _Slow()
        if a.v[G_USAGE] != NULL:
            value = <object>a.v[G_USAGE]
            n = _seq_len(value)
            if n < 2 or n > 4 or not (f.mask & ((<uint64_t>1) << G_USAGE)):
                raise _Slow()
            # the counts read once: a.i[S_PROMPT + j] (the total at S_TOTAL), a.v[...] set for
            # the ones given (cached and reasoning may be None)
            for j in range(n):
                item = _item(value, j)
                s = _USAGE_SLOT[j]
                if j >= 2 and item is None:
                    continue
                if not _int64(item, &a.i[s]):
                    raise _Slow()
                if j >= 2 and not (f.mask & ((<uint64_t>1) << s)):
                    raise _Slow()  # a count the frame has no place for (the Python twin's error)
                a.v[s] = <PyObject *>value  # (a marker: the count is in a.i)
            if self._comp.zero_details:  # (a count not given: 0, not null)
                for j in range(2, 4):
                    s = _USAGE_SLOT[j]
                    if a.v[s] == NULL:
                        a.i[s] = 0
                        a.v[s] = <PyObject *>value
            if (a.i[S_PROMPT] > 0 and a.i[S_COMPLETION] > INT64_MAX - a.i[S_PROMPT]) or \
                    (a.i[S_PROMPT] < 0 and a.i[S_COMPLETION] < INT64_MIN - a.i[S_PROMPT]):
                raise _Slow()  # the total outside int64
            a.i[S_TOTAL] = a.i[S_PROMPT] + a.i[S_COMPLETION]
        elif is_usage_frame:
            raise _Slow()
        return 0

    cdef bint _none(self, int slot, Args *a, tuple entry, tuple top):
        """Whether a guarded member's value is None (entry, top: the current logprob entry
        and top logprob as tuples: _at)."""
        if slot == G_TOP:
            return PyTuple_GET_SIZE(entry) > 3 and <object>PyTuple_GET_ITEM(entry, 3) is None
        elif slot == S_LP_BYTES:
            return PyTuple_GET_SIZE(entry) < 3 or <object>PyTuple_GET_ITEM(entry, 2) is None
        elif slot == S_TOP_BYTES:
            return PyTuple_GET_SIZE(top) < 3 or <object>PyTuple_GET_ITEM(top, 2) is None
        elif slot == S_CACHED or slot == S_REASONING:
            return a.v[slot] == NULL
        elif slot == S_FINGERPRINT:
            return self._c_fp is None
        elif slot == S_ITEM_ID:
            return a.v[slot] == NULL and self._c_item is None
        return a.v[slot] == NULL

    cdef inline int _put_null(self) except -1:
        return self._put("null", 4)

    cdef inline int _put_rendered(self, object value) except -1:
        """A constant rendered once (bytes), or null."""
        if value is None:
            return self._put_null()
        return self._put(PyBytes_AS_STRING(value), PyBytes_GET_SIZE(value))

    cdef int _put_count(self, Args *a, int slot) except -1:
        if slot != S_TOTAL and a.v[slot] == NULL:
            return self._put_null()
        return self._put_int(a.i[slot])

    cdef int _slot(self, int slot, Args *a, tuple entry, tuple top, _Frame f) except -1:
        """Write a slot's value (one switch: the logprobs' slots run per token and per top;
        an entry's fields have their types checked again here: _at)."""
        cdef object value
        cdef PyObject *p
        cdef long long v = 0
        if slot == S_TOP_TOKEN:
            return self._put_token(_at(top, 0))
        elif slot == S_TOP_LOGPROB:
            return self._put_float(_at(top, 1))
        elif slot == S_TOP_BYTES:
            return self._put_entry_ints(_at(top, 2), f)
        elif slot == S_LP_TOKEN:
            return self._put_token(_at(entry, 0))
        elif slot == S_LP_LOGPROB:
            return self._put_float(_at(entry, 1))
        elif slot == S_LP_BYTES:
            return self._put_entry_ints(_at(entry, 2), f)
        elif slot == S_LP_OFFSET:
            p = _at(entry, 4)
            if p == NULL or not _int64(<object>p, &v):
                raise _Slow()
            return self._put_int(v)
        elif slot == S_TEXT or slot == S_FINISH or slot == S_TOOL_ID or slot == S_TOOL_NAME:
            if a.v[slot] == NULL:
                return self._put_null()
            return self._put_str(<object>a.v[slot])
        elif slot == S_INDEX or slot == S_TOOL_INDEX or slot == S_CONTENT_INDEX:
            return self._put_int(a.i[slot] if a.v[slot] != NULL else 0)
        elif slot == S_TOKEN_IDS or slot == S_PROMPT_IDS:
            if a.v[slot] == NULL:
                return self._put_null()
            return self._put_ints(<object>a.v[slot], f)
        elif slot == S_STOP:
            if a.v[slot] == NULL:
                return self._put_null()
            value = <object>a.v[slot]
            if PyUnicode_CheckExact(value):
                return self._put_str(value)
            if not _int64(value, &v):
                raise _Slow()
            return self._put_int(v)
        elif slot == S_ITEM_ID:
            if a.v[slot] != NULL:
                return self._put_str(<object>a.v[slot])
            return self._put_rendered(self._c_item)
        elif slot == S_ID:
            return self._put_rendered(self._c_id)
        elif slot == S_MODEL:
            return self._put_rendered(self._c_model)
        elif slot == S_CREATED:
            return self._put_rendered(self._c_created)
        elif slot == S_ROLE:
            return self._put_rendered(self._c_role)
        elif slot == S_FINGERPRINT:
            return self._put_rendered(self._c_fp)
        elif slot == S_SEQ:
            return self._put_int(self._seq)
        elif slot == S_PROMPT or slot == S_COMPLETION or slot == S_TOTAL or slot == S_CACHED \
                or slot == S_REASONING:
            return self._put_count(a, slot)
        return 0

    cdef int _run(self, _Frame f, Args *a, int start, int stop_at) except -2:
        """Run the frame's ops from ``start``; returns at the first ``stop_at`` slot (its op
        index), or -1 at the end."""
        cdef int i = start
        cdef Op *op
        cdef object entries = None, tops = None
        cdef tuple entry = _EMPTY, top = _EMPTY
        cdef dict by_token
        cdef Py_ssize_t ei = 0, ti = 0, ne = 0, nt = 0, k
        while i < f.n:
            op = &f.ops[i]
            if op.code == OP_CONST:
                self._put(op.p, op.n)
                i += 1
            elif op.code == OP_SLOT:
                if op.a == stop_at:
                    return i
                self._slot(op.a, a, entry, top, f)
                i += 1
            elif op.code == OP_MEMBER:
                if self._none(op.a, a, entry, top):
                    if not op.b:
                        self._put(op.p, op.n)
                        self._put(op.q, op.m)
                    i = op.c
                else:
                    self._put(op.p, op.n)
                    i += 1
            elif op.code == OP_LOOP:
                if op.a == 1:
                    entries = <object>a.v[G_LOGPROBS]
                    ne = _seq_len(entries)
                    ei = 0
                    if ne <= 0:
                        i = op.c
                        continue
                    entry = _as_tuple(_item(entries, 0))
                else:
                    tops = <object>_at(entry, 3) if _at(entry, 3) != NULL else _EMPTY
                    if tops is None:
                        tops = _EMPTY
                    if op.b and _seq_len(tops) > 1:  # a dict by token: first place, last value
                        by_token = {}
                        for k in range(_seq_len(tops)):
                            t = _item(tops, k)
                            key = _as_tuple(t)[0] if _seq_len(t) > 0 else None
                            if not PyUnicode_CheckExact(key):
                                raise _Slow()  # (changed since its check)
                            by_token[key] = t
                        tops = list(by_token.values())
                    nt = _seq_len(tops)
                    ti = 0
                    if nt <= 0:
                        i = op.c
                        continue
                    top = _as_tuple(_item(tops, 0))
                i += 1
            else:  # OP_NEXT
                if op.a == 1:
                    ei += 1
                    if ei < ne:
                        entry = _as_tuple(_item(entries, ei))
                        self._put(op.p, op.n)
                        i = op.c
                        continue
                else:
                    ti += 1
                    if ti < nt:
                        top = _as_tuple(_item(tops, ti))
                        self._put(op.p, op.n)
                        i = op.c
                        continue
                i += 1
        return -1

    cdef int _frame(self, _Frame f, Args *a, bint is_usage_frame) except -1:
        if f.counts and self._seq == INT64_MAX:
            raise _Slow()  # (the last number: the Python twin's OverflowError, the next past int64)
        self._check(f, a, is_usage_frame)
        self._run(f, a, 0, -1)
        if f.counts:
            self._seq += 1
        return 0

    cdef object _split_text(self, long long index):
        """The text frame of choice ``index`` with no other value, as (the bytes before its
        text, the bytes after it), for text() and texts() to write around a text; None when
        the frame has the text twice."""
        cdef _Frame f = self._comp.text
        cdef Args a
        cdef int at
        _clear(&a)
        a.v[S_INDEX] = <PyObject *>_ZERO  # (any value: the int is a.i)
        a.i[S_INDEX] = index
        try:
            self.len = 0
            at = self._run(f, &a, 0, S_TEXT)
            if at < 0:
                return None
            head = PyBytes_FromStringAndSize(self.buf, self.len)
            self.len = 0
            if self._run(f, &a, at + 1, S_TEXT) >= 0:
                return None
            return head, PyBytes_FromStringAndSize(self.buf, self.len)
        finally:
            self._reset()

    cdef tuple _split_counted(self):
        """The counting text frame of choice 0 (a Responses delta) with no other value, as
        (the bytes before the first of its sequence number and text, those between the two,
        those after the second), for text() and texts() to write around the two (the order
        in _counted_text_first); None when the frame is not so (either of them twice, a value
        it needs missing)."""
        cdef _Frame f = self._comp.text
        cdef Args a
        cdef int at, k, first = -1, numbers = 0, texts = 0
        for k in range(f.n):  # (the ops run in their order, jumps only forward)
            if f.ops[k].code == OP_SLOT and (f.ops[k].a == S_SEQ or f.ops[k].a == S_TEXT):
                numbers += f.ops[k].a == S_SEQ
                texts += f.ops[k].a == S_TEXT
                if first < 0:
                    first = f.ops[k].a
        if numbers != 1 or texts != 1:
            return None
        self._counted_text_first = first == S_TEXT
        _clear(&a)
        a.v[S_TEXT] = <PyObject *>_NO_TEXT  # (never written: the runs stop before it)
        a.v[S_INDEX] = <PyObject *>_ZERO
        try:
            self._check(f, &a, False)
            self.len = 0
            at = self._run(f, &a, 0, first)
            if at < 0:
                return None  # (a slot under a member left out: not this frame's plain case)
            head = PyBytes_FromStringAndSize(self.buf, self.len)
            self.len = 0
            at = self._run(f, &a, at + 1, S_SEQ if first == S_TEXT else S_TEXT)
            if at < 0:
                return None
            mid = PyBytes_FromStringAndSize(self.buf, self.len)
            self.len = 0
            self._run(f, &a, at + 1, -1)
            return head, mid, PyBytes_FromStringAndSize(self.buf, self.len)
        except _Slow:
            return None
        finally:
            self._reset()

    cdef inline tuple _counted_split(self):
        """self._counted, made again first when stale (the first delta, a new item)."""
        if self._counted_stale:
            self._counted = self._split_counted()
            self._counted_stale = False
        return self._counted

    cdef object _split_of(self, long long index):
        """The split of choice ``index`` (0 and the first few kept), or None."""
        cdef Py_ssize_t k
        if index == 0:
            return None if self._head0 is None else (self._head0, self._tail0)
        if self._head0 is None or index < 0:
            return None
        if index <= len(self._heads):
            return self._heads[index - 1]
        split = self._split_text(index)
        if index == len(self._heads) + 1 and index <= 64:
            self._heads.append(split)
        return split

    cdef int _put_around(self, bytes head, bytes tail, object text) except -1:
        """head, the text as a JSON string, tail."""
        self._put(PyBytes_AS_STRING(head), PyBytes_GET_SIZE(head))
        self._put_text(text)
        return self._put(PyBytes_AS_STRING(tail), PyBytes_GET_SIZE(tail))

    cdef inline int _put_text(self, object text) except -1:
        """A str as a JSON string, copied when it needs no escape."""
        cdef Py_ssize_t n = PyUnicode_GET_LENGTH(text)
        cdef const unsigned char *p
        if PyUnicode_IS_ASCII(text):
            p = <const unsigned char *>PyUnicode_DATA(text)
            if tok_esc_scan(p, n, self._ascii) == n:
                self._room(n + 2)
                self.buf[self.len] = 34  # '"'
                tok_copy(self.buf + self.len + 1, <const char *>p, n)
                self.buf[self.len + 1 + n] = 34
                self.len += n + 2
            else:
                self._put_str(text)
        else:
            self._put_str(text)
        return 0

    cdef inline char *_write_counted(self, char *o, bytes head, bytes mid, bytes tail,
                                     long long seq, const char *p, Py_ssize_t n) noexcept:
        """One Responses delta at o, its text needing no escape: the split's three parts
        around the number seq and the quoted text, in the frame's order; the end."""
        cdef Py_ssize_t mn = PyBytes_GET_SIZE(mid)
        tok_copy(o, PyBytes_AS_STRING(head), PyBytes_GET_SIZE(head))
        o += PyBytes_GET_SIZE(head)
        if not self._counted_text_first:
            o += tok_fmt_i64(o, seq)
            tok_copy(o, PyBytes_AS_STRING(mid), mn)
            o += mn
        o[0] = 34  # '"'
        tok_copy(o + 1, p, n)
        o[n + 1] = 34
        o += n + 2
        if self._counted_text_first:
            tok_copy(o, PyBytes_AS_STRING(mid), mn)
            o += mn
            o += tok_fmt_i64(o, seq)
        tok_copy(o, PyBytes_AS_STRING(tail), PyBytes_GET_SIZE(tail))
        return o + PyBytes_GET_SIZE(tail)

    cdef object _counted_frames(self, tuple texts):
        """Responses deltas of texts that need no escape written straight into one bytes of
        their exact size, numbered from the next number; None when one needs more, or a
        number would be the last (the caller writes them through its buffer)."""
        cdef Py_ssize_t n = PyTuple_GET_SIZE(texts), k, m, hn, mn, tn, total = 0
        cdef long long seq = self._seq
        cdef char *o
        cdef bytes head, mid, tail
        if n == 0 or seq > INT64_MAX - n:
            return None
        head, mid, tail = self._counted
        hn, mn, tn = PyBytes_GET_SIZE(head), PyBytes_GET_SIZE(mid), PyBytes_GET_SIZE(tail)
        for k in range(n):
            text = <object>PyTuple_GET_ITEM(texts, k)
            if not PyUnicode_CheckExact(text) or not PyUnicode_IS_ASCII(text):
                return None
            m = PyUnicode_GET_LENGTH(text)
            if tok_esc_scan(<const unsigned char *>PyUnicode_DATA(text), m, self._ascii) != m:
                return None
            total += hn + mn + tn + m + 2 + _ndigits(seq + k)
        out = PyBytes_FromStringAndSize(NULL, total)
        o = PyBytes_AS_STRING(out)
        for k in range(n):
            text = <object>PyTuple_GET_ITEM(texts, k)
            o = self._write_counted(o, head, mid, tail, seq + k,
                                    <const char *>PyUnicode_DATA(text),
                                    PyUnicode_GET_LENGTH(text))
        self._seq = seq + n
        return out

    cdef int _put_counted(self, bytes head, bytes mid, bytes tail, object text) except -1:
        """A Responses delta of choice 0: the split's three parts (self._counted) around its
        sequence number and the text as a JSON string, in the frame's order; the number is
        the next one."""
        cdef Py_ssize_t hn = PyBytes_GET_SIZE(head), mn = PyBytes_GET_SIZE(mid)
        cdef Py_ssize_t tn = PyBytes_GET_SIZE(tail)
        cdef char *o
        self._room(hn + mn + tn + 24)  # (all but the text, which _put_text makes room for)
        o = self.buf + self.len
        tok_copy(o, PyBytes_AS_STRING(head), hn)
        o += hn
        if not self._counted_text_first:
            o += tok_fmt_i64(o, self._seq)
            tok_copy(o, PyBytes_AS_STRING(mid), mn)
            o += mn
        self.len = o - self.buf
        self._put_text(text)
        self._room(mn + tn + 24)
        o = self.buf + self.len
        if self._counted_text_first:
            tok_copy(o, PyBytes_AS_STRING(mid), mn)
            o += mn
            o += tok_fmt_i64(o, self._seq)
        tok_copy(o, PyBytes_AS_STRING(tail), tn)
        self.len = o + tn - self.buf
        self._seq += 1
        return 0

    # --- the calls

    cdef object _slow(self, str method, tuple args, dict kwargs):
        """The call on a Python twin writer with this one's state: its result (and sequence
        number), or its exception."""
        id_, model, created, fingerprint, role = self._init
        twin = _py.StreamWriter(self._shape, id=id_, model=model, created=created,
                                system_fingerprint=fingerprint, role=role,
                                item_id=self._item_text)
        twin.sequence_number = self._seq
        out = getattr(twin, method)(*args, **kwargs)
        self._seq = twin.sequence_number
        return out

    cdef bint _failed(self, long long seq) noexcept:
        """In a call's ``except BaseException:`` clause: the buffer emptied and the sequence
        number as it was (``seq``); whether the error is _Slow (a value the C path does not
        take: the caller hands the call to the Python twin) rather than one to raise."""
        cdef PyObject *error = PyErr_GetHandledException()
        cdef bint slow = error != NULL and <PyObject *>Py_TYPE(<object>error) == <PyObject *>_Slow
        Py_XDECREF(error)
        self._reset()
        self._seq = seq
        return slow

    def text(self, text, index=0):
        cdef Py_ssize_t n, hn, tn, mn
        cdef long long v = 1
        cdef const unsigned char *p
        cdef Args a
        cdef bytes head, tail, mid
        if not tok_busy_enter(self, &self._busy):
            raise in_use("StreamWriter")
        try:
            if self._head0 is None and <PyObject *>index == <PyObject *>_ZERO and \
                    PyUnicode_CheckExact(text) and PyUnicode_IS_ASCII(text) and \
                    self._comp.text is not None and self._comp.text.counts:
                # a Responses delta: its number and the text between the split's three parts
                n = PyUnicode_GET_LENGTH(text)
                p = <const unsigned char *>PyUnicode_DATA(text)
                if self._counted_split() is not None and self._seq != INT64_MAX and \
                        tok_esc_scan(p, n, self._ascii) == n:
                    head, mid, tail = self._counted
                    hn, mn, tn = PyBytes_GET_SIZE(head), PyBytes_GET_SIZE(mid), \
                        PyBytes_GET_SIZE(tail)
                    out = PyBytes_FromStringAndSize(
                        NULL, hn + _ndigits(self._seq) + mn + n + 2 + tn)
                    self._write_counted(PyBytes_AS_STRING(out), head, mid, tail, self._seq,
                                        <const char *>p, n)
                    self._seq += 1
                    return out
            if self._head0 is not None and PyUnicode_CheckExact(text) and (
                    <PyObject *>index == <PyObject *>_ZERO or _int64(index, &v)):
                if <PyObject *>index == <PyObject *>_ZERO or v == 0:
                    head, tail = self._head0, self._tail0
                else:
                    split = self._split_of(v)
                    if split is None:
                        head = None
                    else:
                        head, tail = split
                if head is not None:
                    if PyUnicode_IS_ASCII(text):
                        n = PyUnicode_GET_LENGTH(text)
                        p = <const unsigned char *>PyUnicode_DATA(text)
                        if tok_esc_scan(p, n, self._ascii) == n:  # the common text: a copy
                            hn, tn = PyBytes_GET_SIZE(head), PyBytes_GET_SIZE(tail)
                            out = PyBytes_FromStringAndSize(NULL, hn + n + 2 + tn)
                            _write_around(PyBytes_AS_STRING(out), PyBytes_AS_STRING(head), hn,
                                          <const char *>p, n, PyBytes_AS_STRING(tail), tn)
                            return out
            else:
                head = None
            try:
                if head is not None:  # a text to escape, between its choice's two parts
                    self._put_around(head, tail, text)
                else:
                    if self._comp.text is None:
                        raise _Slow()
                    _clear(&a)
                    a.v[S_TEXT] = <PyObject *>text
                    a.v[S_INDEX] = <PyObject *>index
                    self._frame(self._comp.text, &a, False)
            except BaseException:
                if not self._failed(self._seq):  # (one frame: unchanged)
                    raise
                return self._slow("text", (text, index), {})
            return self._take()
        finally:
            tok_busy_leave(self, &self._busy)

    def texts(self, texts, index=0):
        cdef Py_ssize_t n, k
        cdef Args a
        cdef _Frame f = self._comp.text
        cdef long long seq, v = 1
        cdef bytes head, tail, mid
        if not PyTuple_CheckExact(texts):
            if not PyList_CheckExact(texts):
                # (its checks, and a list of the items: the rare input; a list or tuple
                # subclass's items as stored, as the Python twin reads them)
                texts = _py._items(texts, "texts")
            texts = tuple(texts)  # (one copy of the item pointers: the fast path reads them twice)
        if not tok_busy_enter(self, &self._busy):
            raise in_use("StreamWriter")
        seq = self._seq
        try:
            try:
                if f is None:
                    raise _Slow()
                n = _seq_len(texts)
                if self._head0 is None and f.counts and <PyObject *>index == <PyObject *>_ZERO:
                    # Responses deltas: each one between its split's three parts
                    if self._counted_split() is not None:
                        if PyTuple_CheckExact(texts):  # (its items cannot change meanwhile)
                            out = self._counted_frames(<tuple>texts)
                            if out is not None:
                                return out
                        head, mid, tail = self._counted
                        for k in range(n):
                            text = _item(texts, k)
                            if not PyUnicode_CheckExact(text) or self._seq == INT64_MAX:
                                raise _Slow()  # (the Python twin's TypeError, OverflowError)
                            self._put_counted(head, mid, tail, text)
                        return self._take()
                split = self._split_of(v) if _int64(index, &v) else None
                if split is not None:  # each text between its choice's two parts
                    head, tail = split
                    if PyTuple_CheckExact(texts):  # (its items cannot change meanwhile)
                        out = _plain_frames(head, tail, <tuple>texts, self._ascii)
                        if out is not None:
                            return out
                    for k in range(n):
                        text = _item(texts, k)
                        if not PyUnicode_CheckExact(text):
                            raise _Slow()
                        self._put_around(head, tail, text)
                    return self._take()
                for k in range(n):
                    _clear(&a)
                    text = _item(texts, k)  # (held while its frame is written)
                    _set(&a, S_TEXT, text)
                    a.v[S_INDEX] = <PyObject *>index
                    self._frame(f, &a, False)
            except BaseException:
                if not self._failed(seq):
                    raise
                return self._slow("texts", (texts, index), {})
            return self._take()
        finally:
            tok_busy_leave(self, &self._busy)

    def step(self, text=None, index=0, kind="text", token_ids=None, logprobs=None,
             finish_reason=None, stop_reason=None, usage=None, prompt_token_ids=None):
        cdef Args a
        cdef _Frame f
        if not tok_busy_enter(self, &self._busy):
            raise in_use("StreamWriter")
        try:
            try:
                f = self._step_frame(kind, text, finish_reason)
                _clear(&a)
                _step_values(&a, text, index, token_ids, logprobs, finish_reason, stop_reason,
                             usage, prompt_token_ids)
                self._frame(f, &a, False)
            except BaseException:
                if not self._failed(self._seq):  # (one frame: unchanged)
                    raise
                return self._slow("step", (text, index, kind, token_ids, logprobs,
                                           finish_reason, stop_reason, usage,
                                           prompt_token_ids), {})
            return self._take()
        finally:
            tok_busy_leave(self, &self._busy)

    cdef _Frame _step_frame(self, kind, text, finish_reason):
        cdef _Compiled c = self._comp
        cdef _Frame f
        cdef int k  # 0 text, 1 reasoning, 2 tool_args
        if not PyUnicode_CheckExact(kind):
            raise _Slow()  # (a str subclass's == is not run: the Python twin reads its text)
        if kind == "text":
            f, k = c.text, 0
        elif kind == "reasoning":
            f, k = c.reasoning, 1
        elif kind == "tool_args":
            f, k = c.tool_args, 2
        else:
            raise _Slow()
        if finish_reason is None:
            if f is None:
                raise _Slow()
            return f
        if k == 0:
            if c.finish is not None and (
                    text is None or c.finish.mask & ((<uint64_t>1) << S_TEXT)):
                return c.finish
        elif text is not None:
            own = c.finish_reasoning if k == 1 else c.finish_tool_args
            if own is not None:
                return own
        if f is not None and f.mask & ((<uint64_t>1) << S_FINISH):
            return f
        if c.finish is not None and (k == 0 or text is None):
            return c.finish
        raise _Slow()

    def steps(self, steps):
        cdef Args a
        cdef Py_ssize_t n, k, m
        cdef _Frame f
        cdef long long seq
        if not (PyList_CheckExact(steps) or PyTuple_CheckExact(steps)):
            steps = _py._items(steps, "steps")  # (a subclass's items as stored: a tuple)
        if not tok_busy_enter(self, &self._busy):
            raise in_use("StreamWriter")
        seq = self._seq
        try:
            try:
                n = _seq_len(steps)
                for k in range(n):
                    item = _item(steps, k)
                    m = _seq_len(item)
                    if m < 0 or m > 9:
                        raise _Slow()
                    # each field held while its frame is written
                    text = _item(item, 0) if m > 0 else None
                    index = _item(item, 1) if m > 1 else _ZERO
                    kind = _item(item, 2) if m > 2 else "text"
                    token_ids = _item(item, 3) if m > 3 else None
                    logprobs = _item(item, 4) if m > 4 else None
                    finish = _item(item, 5) if m > 5 else None
                    stop = _item(item, 6) if m > 6 else None
                    usage = _item(item, 7) if m > 7 else None
                    prompt_ids = _item(item, 8) if m > 8 else None
                    f = self._step_frame(kind, text, finish)
                    _clear(&a)
                    _step_values(&a, text, index, token_ids, logprobs, finish, stop, usage,
                                 prompt_ids)
                    self._frame(f, &a, False)
            except BaseException:
                if not self._failed(seq):
                    raise
                return self._slow("steps", (steps,), {})
            return self._take()
        finally:
            tok_busy_leave(self, &self._busy)

    def write(self, frame, text=None, index=0, *, token_ids=None, logprobs=None,
              finish_reason=None, stop_reason=None, usage=None, tool_index=0, tool_id=None,
              tool_name=None, item_id=None, content_index=0, prompt_token_ids=None):
        cdef Args a
        cdef PyObject *found
        if not tok_busy_enter(self, &self._busy):
            raise in_use("StreamWriter")
        try:
            try:
                found = PyDict_GetItem(self._comp.frames, frame) \
                    if PyUnicode_CheckExact(frame) else NULL
                if found == NULL:
                    raise _Slow()
                _clear(&a)
                _step_values(&a, text, index, token_ids, logprobs, finish_reason, stop_reason,
                             usage, prompt_token_ids)
                a.v[S_TOOL_INDEX] = <PyObject *>tool_index
                _set(&a, S_TOOL_ID, tool_id)
                _set(&a, S_TOOL_NAME, tool_name)
                _set(&a, S_ITEM_ID, item_id)
                a.v[S_CONTENT_INDEX] = <PyObject *>content_index
                self._frame(<_Frame>found, &a, frame == "usage")
            except BaseException:
                if not self._failed(self._seq):  # (one frame: unchanged)
                    raise
                return self._slow("write", (frame, text, index), dict(
                    token_ids=token_ids, logprobs=logprobs, finish_reason=finish_reason,
                    stop_reason=stop_reason, usage=usage, tool_index=tool_index,
                    tool_id=tool_id, tool_name=tool_name, item_id=item_id,
                    content_index=content_index, prompt_token_ids=prompt_token_ids))
            return self._take()
        finally:
            tok_busy_leave(self, &self._busy)

    def usage(self, prompt_tokens, completion_tokens, cached_tokens=None,
              reasoning_tokens=None):
        cdef Args a
        counts = (prompt_tokens, completion_tokens, cached_tokens, reasoning_tokens)
        if not tok_busy_enter(self, &self._busy):
            raise in_use("StreamWriter")
        try:
            try:
                if self._comp.usage is None:
                    raise _Slow()  # (the Python twin's ValueError)
                _clear(&a)
                a.v[G_USAGE] = <PyObject *>counts
                self._frame(self._comp.usage, &a, True)
            except BaseException:
                if not self._failed(self._seq):  # (one frame: unchanged)
                    raise
                return self._slow("usage", counts, {})
            return self._take()
        finally:
            tok_busy_leave(self, &self._busy)

    def done(self):
        cdef Args a
        if not tok_busy_enter(self, &self._busy):
            raise in_use("StreamWriter")
        try:
            try:
                if self._done is None:
                    raise _Slow()  # (the Python twin's ValueError)
                _clear(&a)
                self._frame(self._done, &a, False)
            except BaseException:
                if not self._failed(self._seq):  # (one frame: unchanged)
                    raise
                return self._slow("done", (), {})
            return self._take()
        finally:
            tok_busy_leave(self, &self._busy)


cdef object _ZERO = 0


cdef str _NO_TEXT = ""
cdef tuple _EMPTY = ()


cdef inline void _clear(Args *a) noexcept:
    cdef int k
    for k in range(NVALUES):
        a.v[k] = NULL
        a.i[k] = 0


cdef inline char *_write_around(char *o, const char *head, Py_ssize_t hn, const char *p,
                                Py_ssize_t n, const char *tail, Py_ssize_t tn) noexcept:
    """head[:hn], p[:n] quoted (a text that needs no escape), tail[:tn] at o; the end."""
    tok_copy(o, head, hn)
    o[hn] = 34  # '"'
    tok_copy(o + hn + 1, p, n)
    o[hn + 1 + n] = 34
    tok_copy(o + hn + 2 + n, tail, tn)
    return o + hn + n + 2 + tn


cdef object _plain_frames(bytes head, bytes tail, tuple texts, int ascii):
    """The frames of texts that need no escape (ASCII str, no quote, backslash or control
    character) written straight into one bytes of their exact size; None when one needs
    more (the caller writes them through its buffer)."""
    cdef Py_ssize_t n = PyTuple_GET_SIZE(texts), k, hn, tn, total = 0, m
    cdef char *o
    cdef const char *h = PyBytes_AS_STRING(head)
    cdef const char *t = PyBytes_AS_STRING(tail)
    hn, tn = PyBytes_GET_SIZE(head), PyBytes_GET_SIZE(tail)
    for k in range(n):
        text = <object>PyTuple_GET_ITEM(texts, k)
        if not PyUnicode_CheckExact(text) or not PyUnicode_IS_ASCII(text):
            return None
        m = PyUnicode_GET_LENGTH(text)
        if tok_esc_scan(<const unsigned char *>PyUnicode_DATA(text), m, ascii) != m:
            return None
        total += hn + m + 2 + tn
    out = PyBytes_FromStringAndSize(NULL, total)
    o = PyBytes_AS_STRING(out)
    for k in range(n):
        text = <object>PyTuple_GET_ITEM(texts, k)
        o = _write_around(o, h, hn, <const char *>PyUnicode_DATA(text),
                          PyUnicode_GET_LENGTH(text), t, tn)
    return out


cdef inline Py_ssize_t _ndigits(long long v) noexcept:
    """The characters tok_fmt_i64 writes for v (its sign included): halving the digits left
    (divisions by constants, no loop)."""
    cdef unsigned long long u = <unsigned long long>v
    cdef Py_ssize_t d = 1
    if v < 0:
        u = 0ULL - u
        d = 2
    if u >= 10000000000000000ULL:
        d += 16
        u //= 10000000000000000ULL
    if u >= 100000000ULL:
        d += 8
        u //= 100000000ULL
    if u >= 10000ULL:
        d += 4
        u //= 10000ULL
    if u >= 100ULL:
        d += 2
        u //= 100ULL
    return d + (u >= 10)


cdef inline void _set(Args *a, int slot, object value) noexcept:
    a.v[slot] = NULL if value is None else <PyObject *>value


cdef inline void _step_values(Args *a, object text, object index, object token_ids,
                              object logprobs, object finish, object stop, object usage,
                              object prompt_ids) noexcept:
    """A step's values set in a, cleared before (step, steps, write; borrowed: the caller
    holds them while the frame is written). The index as given: None is no default but a
    wrong type."""
    _set(a, S_TEXT, text)
    a.v[S_INDEX] = <PyObject *>index
    _set(a, S_TOKEN_IDS, token_ids)
    _set(a, G_LOGPROBS, logprobs)
    _set(a, S_FINISH, finish)
    _set(a, S_STOP, stop)
    _set(a, G_USAGE, usage)
    _set(a, S_PROMPT_IDS, prompt_ids)


# The constructor's TypeErrors for arguments that do not bind are the Python twin's, message
# and all (Cython's own messages differ): when Cython's __init__ raises a TypeError, the
# arguments are bound by _writer_py._bind (a function of the constructor's signature) and
# its error replaces Cython's; when they bind, the error was the body's and is kept. The
# class's vectorcall (a call of the class) and tp_init (a subclass's) are wrapped so, at no
# cost to a call that succeeds (a signature of *args and **kwargs cost 2,600 instructions).
cdef extern from *:
    """
    static vectorcallfunc tok_writer_parsed_call = NULL;
    static initproc tok_writer_parsed_init = NULL;
    static PyObject *tok_writer_bind = NULL;

    /* after a TypeError of Cython's __init__: the arguments bound by _bind, whose error
     * (the Python twin's) replaces it; when they bind, the error was the body's, kept */
    static void tok_writer_rebind(PyObject *args, PyObject *const *vector, size_t nargsf,
                                  PyObject *kw) {
        PyObject *bound;
    #if PY_VERSION_HEX >= 0x030C0000  /* (PyErr_Fetch is deprecated from 3.12 on) */
        PyObject *raised = PyErr_GetRaisedException();
    #else
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
    #endif
        bound = vector != NULL ? PyObject_Vectorcall(tok_writer_bind, vector, nargsf, kw)
                               : PyObject_Call(tok_writer_bind, args, kw);
        if (bound == NULL) {  /* the Python twin's error replaces Cython's */
    #if PY_VERSION_HEX >= 0x030C0000
            Py_XDECREF(raised);
    #else
            Py_XDECREF(type);
            Py_XDECREF(value);
            Py_XDECREF(tb);
    #endif
            return;
        }
        Py_DECREF(bound);
    #if PY_VERSION_HEX >= 0x030C0000
        PyErr_SetRaisedException(raised);
    #else
        PyErr_Restore(type, value, tb);
    #endif
    }

    static PyObject *tok_writer_call(PyObject *type, PyObject *const *args, size_t nargsf,
                                     PyObject *kwnames) {
        PyObject *made = tok_writer_parsed_call(type, args, nargsf, kwnames);
        if (made == NULL && PyErr_ExceptionMatches(PyExc_TypeError))
            tok_writer_rebind(NULL, args, nargsf, kwnames);
        return made;
    }

    static int tok_writer_init(PyObject *self, PyObject *args, PyObject *kw) {
        int done = tok_writer_parsed_init(self, args, kw);
        if (done < 0 && PyErr_ExceptionMatches(PyExc_TypeError))
            tok_writer_rebind(args, NULL, 0, kw);
        return done;
    }

    static int tok_writer_wrap_init(PyObject *type, PyObject *bind) {
        PyTypeObject *t = (PyTypeObject *)type;
        Py_INCREF(bind);
        tok_writer_bind = bind;
        tok_writer_parsed_init = t->tp_init;
        t->tp_init = tok_writer_init;
        tok_writer_parsed_call = t->tp_vectorcall;
        if (tok_writer_parsed_call != NULL)
            t->tp_vectorcall = tok_writer_call;
        PyType_Modified(t);
        return 0;
    }
    """
    int tok_writer_wrap_init(object type, object bind) except -1


tok_writer_wrap_init(StreamWriter, _py._bind)
