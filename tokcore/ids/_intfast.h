/* Read a Python int's value without a C-API call when it fits in one internal digit.
 *
 * tok_compact_value() returns 1 and stores the value for an exact int of at most one
 * 30-bit digit, 0 otherwise (the caller then takes the portable PyLong_As* path).
 * CPython's int layout is private and changed in 3.12, so each branch is pinned to the
 * versions whose layout it knows; anything else gets the portable answer 0.
 */
#ifndef TOKCORE_INTFAST_H
#define TOKCORE_INTFAST_H

#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_byteorder.h"

#if defined(PYPY_VERSION) || defined(Py_LIMITED_API)
#  define TOK_INTFAST_KIND "portable"
static inline int tok_compact_value(PyObject *o, long *out) { (void)o; (void)out; return 0; }
#elif PY_VERSION_HEX >= 0x030C0000
/* 3.12+: the documented unstable API for exactly this purpose. */
#  define TOK_INTFAST_KIND "PyUnstable_Long_CompactValue"
static inline int tok_compact_value(PyObject *o, long *out) {
    if (!PyUnstable_Long_IsCompact((PyLongObject *)o)) return 0;
    *out = (long)PyUnstable_Long_CompactValue((PyLongObject *)o);
    return 1;
}
#elif PY_VERSION_HEX >= 0x03090000
/* 3.9-3.11: ob_size is the signed digit count, ob_digit[0] the low 30 (or 15) bits. */
#  define TOK_INTFAST_KIND "ob_digit"
static inline int tok_compact_value(PyObject *o, long *out) {
    Py_ssize_t size = Py_SIZE(o);
    if (size < -1 || size > 1) return 0;
    /* 3.11 allocates every int with at least one digit (its own medium_value reads
     * ob_digit[0] of a zero, times the size 0): no branch on zero, which random token ids
     * would mispredict */
    *out = (long)size * (long)((PyLongObject *)o)->ob_digit[0];
    return 1;
}
#else
#  define TOK_INTFAST_KIND "portable"
static inline int tok_compact_value(PyObject *o, long *out) { (void)o; (void)out; return 0; }
#endif

/* The most ids one call takes (_pack_py.MAX_IDS, which _pack_c checks it against): with
 * 32 bytes an id, no output's size (21 bytes an int64 id in JSON, and 18 around the ids at
 * most) overflows a Py_ssize_t. */
#define TOK_MAX_IDS (PY_SSIZE_T_MAX / 32)

/* unpack_ids shares one int object per id below this limit, made on first use. With the
 * GIL a slot is filled by a plain store; without it (free-threaded builds) by a compare and
 * swap, read with acquire loads, so two threads filling one slot agree on one int (the
 * loser drops its own). A compiler without those builtins does without the cache there. */
#define TOK_ID_CACHE_LIMIT (1 << 18)
#if !defined(Py_GIL_DISABLED)
#  define TOK_ID_CACHE_ENABLED 1
#  define TOK_ID_SLOT(p) (*(p))
#elif defined(__GNUC__) || defined(__clang__)
#  define TOK_ID_CACHE_ENABLED 1
#  define TOK_ID_SLOT(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#else
#  define TOK_ID_CACHE_ENABLED 0
#  define TOK_ID_SLOT(p) (*(p))
#endif

/* The int object for an id, from a table of TOK_ID_CACHE_LIMIT shared ints that is filled
 * on first use (ints are immutable, so sharing them is safe); NULL with an exception set on
 * failure. _pack_c owns the one table; _b64_c borrows it, so both fill the same cache. */
static inline PyObject *tok_id_object(PyObject **table, int32_t value) {
    if (TOK_ID_CACHE_ENABLED && (uint32_t)value < (uint32_t)TOK_ID_CACHE_LIMIT) {
        PyObject *obj = TOK_ID_SLOT(&table[value]);
        if (obj == NULL) {
            obj = PyLong_FromLong(value);  /* this new reference is the table's */
            if (obj == NULL) return NULL;
#ifdef Py_GIL_DISABLED
            PyObject *filled = NULL;
            if (!__atomic_compare_exchange_n(&table[value], &filled, obj, 0, __ATOMIC_ACQ_REL,
                                             __ATOMIC_ACQUIRE)) {
                Py_DECREF(obj);  /* another thread filled the slot first: its int */
                obj = filled;
            }
#else
            table[value] = obj;
#endif
        }
        Py_INCREF(obj);
        return obj;
    }
    return PyLong_FromLong(value);
}

#if defined(__GNUC__) || defined(__clang__)
#  define TOK_PREFETCH_READ(p) __builtin_prefetch((p), 0, 3)
#  define TOK_PREFETCH_WRITE(p) __builtin_prefetch((p), 1, 3)
#else
#  define TOK_PREFETCH_READ(p) ((void)(p))
#  define TOK_PREFETCH_WRITE(p) ((void)(p))
#endif

/* The int object for an int64 id: the shared table's below its limit, as tok_id_object. */
static inline PyObject *tok_id_object64(PyObject **table, int64_t value) {
    if ((uint64_t)value < (uint64_t)TOK_ID_CACHE_LIMIT) return tok_id_object(table, (int32_t)value);
    return PyLong_FromLongLong(value);
}

/* Pack items[start:n] while each is an exact int of one digit (always inside int32), as
 * ids of `width` bytes (4 or 8: tok_store_id); return the index of the first item that
 * needs the slow path, or n. */
TOK_WIDTH_INLINE Py_ssize_t tok_pack_compact(PyObject *const *items, Py_ssize_t start,
                                            Py_ssize_t n, unsigned char *out, int width) {
    Py_ssize_t i;
    long v;
    for (i = start; i < n; i++) {
        PyObject *o = items[i];
        if (Py_TYPE(o) != &PyLong_Type || !tok_compact_value(o, &v)) break;
        tok_store_id(out + (Py_ssize_t)width * i, (int64_t)v, width);
    }
    return i;
}

/* items[i] = the int object for the i-th little-endian id of `width` bytes (4 or 8) at
 * src, for i < n; 0, or -1 with an exception set (the items made so far are set, the rest
 * left as they were).
 * Random ids make this loop wait on memory twice per id: for the table slot and for the
 * int's refcount. Both are asked for ahead (the slot TOK_AHEAD_SLOT ids ahead, the int
 * TOK_AHEAD_INT ids ahead, once its slot has arrived) so that the misses overlap. */
#define TOK_AHEAD_SLOT 64
#define TOK_AHEAD_INT 32
TOK_WIDTH_INLINE int tok_fill_ids(PyObject **table, const unsigned char *src, Py_ssize_t n,
                                 PyObject **items, int width) {
    Py_ssize_t i;
    for (i = 0; i < n; i++) {
        if (TOK_ID_CACHE_ENABLED) {
            if (i + TOK_AHEAD_SLOT < n) {
                uint64_t ahead = (uint64_t)tok_load_id(src + width * (i + TOK_AHEAD_SLOT), width);
                if (ahead < (uint64_t)TOK_ID_CACHE_LIMIT) TOK_PREFETCH_READ(table + ahead);
            }
            if (i + TOK_AHEAD_INT < n) {
                uint64_t ahead = (uint64_t)tok_load_id(src + width * (i + TOK_AHEAD_INT), width);
                PyObject *next = ahead < (uint64_t)TOK_ID_CACHE_LIMIT
                                 ? TOK_ID_SLOT(&table[ahead]) : NULL;
                if (next != NULL) TOK_PREFETCH_WRITE(next);
            }
        }
        PyObject *obj = width == 8 ? tok_id_object64(table, tok_load_le64(src + 8 * i))
                                   : tok_id_object(table, tok_load_le32(src + 4 * i));
        if (obj == NULL) return -1;
        items[i] = obj;
    }
    return 0;
}

#endif
