/* What the compiled twins need to be safe without the GIL, and free with it.
 *
 * On a free-threaded build (Py_GIL_DISABLED) these take CPython's per-object critical
 * sections, atomics and strong references; on a GIL build each one compiles to what the code
 * did before (the GIL already serialises it), so GIL builds pay nothing. (Base64's kernel
 * switch is an atomic int: _b64_core.h.) DESIGN.md ("Threads", among the contracts) says
 * what is locked and why.
 */
#ifndef TOKCORE_FREETHREADING_H
#define TOKCORE_FREETHREADING_H

#include <Python.h>
#include <stdint.h>
#if defined(Py_GIL_DISABLED) && defined(_WIN32)
#  include <windows.h>
#  define TOK_YIELD() SwitchToThread()
#elif defined(Py_GIL_DISABLED)
#  include <sched.h>
#  define TOK_YIELD() sched_yield()
#endif

/* A critical section on one object that can be begun and ended from Cython statements
 * (Py_BEGIN_CRITICAL_SECTION opens a C block). Only code that cannot run Python code or block
 * may sit between tok_cs_begin and tok_cs_end: then the section is never suspended and what
 * it guards stays consistent. */
typedef struct {
#ifdef Py_GIL_DISABLED
    PyCriticalSection cs;
#else
    char unused;
#endif
} tok_cs;

static inline void tok_cs_begin(tok_cs *cs, PyObject *o) {
#ifdef Py_GIL_DISABLED
    PyCriticalSection_Begin(&cs->cs, o);
#else
    (void)cs; (void)o;
#endif
}

static inline void tok_cs_end(tok_cs *cs) {
#ifdef Py_GIL_DISABLED
    PyCriticalSection_End(&cs->cs);
#else
    (void)cs;
#endif
}

/* A per-object busy flag (one call at a time on a relay, decoder or big-event scan, its
 * constructor included): tested and set under a critical section on its owner. 1 when it was
 * free (the caller owns it now), 0 when another call holds it (the caller raises
 * RuntimeError). tok_busy_leave clears it the same way, so what one call wrote happens before
 * what the next call reads. Without the GIL the flag holds the thread state of the call that
 * took it, so that tok_idle_begin can tell a read made from inside that call (a profile hook,
 * a signal handler: the same thread, which must not wait for itself); with the GIL it is 1. */
typedef uintptr_t tok_busy;

static inline tok_busy tok_busy_self(void) {
#ifdef Py_GIL_DISABLED
    return (tok_busy)PyThreadState_Get();
#else
    return 1;
#endif
}

static inline int tok_busy_enter(PyObject *owner, tok_busy *flag) {
    tok_cs cs;
    tok_busy was;
    tok_cs_begin(&cs, owner);
    was = *flag;
    if (!was) *flag = tok_busy_self();
    tok_cs_end(&cs);
    return !was;
}

static inline void tok_busy_leave(PyObject *owner, tok_busy *flag) {
    tok_cs cs;
    tok_cs_begin(&cs, owner);
    *flag = 0;
    tok_cs_end(&cs);
}

/* Begin a critical section on owner at a moment when no call of another thread holds its
 * busy flag, for a property that reads what a call changes (pending_bytes, counts): a call
 * running on another thread may be replacing the objects it reads. Without the GIL it waits,
 * detached, for that call to end (then none can start until tok_cs_end); a call of this
 * thread (the read is made from inside it) is answered at once, with the state that call has
 * reached: it cannot move on until the read returns. With the GIL none runs meanwhile. */
static inline void tok_idle_begin(tok_cs *cs, PyObject *owner, tok_busy *flag) {
#ifdef Py_GIL_DISABLED
    tok_busy self = tok_busy_self();
    for (;;) {
        PyCriticalSection_Begin(&cs->cs, owner);
        if (!*flag || *flag == self) return;
        PyCriticalSection_End(&cs->cs);
        Py_BEGIN_ALLOW_THREADS
        TOK_YIELD();
        Py_END_ALLOW_THREADS
    }
#else
    (void)cs; (void)owner; (void)flag;
#endif
}

/* d[key] or NULL (an exception set when it is an error), to be given back with
 * tok_dict_release once the caller holds its own reference. Without the GIL a borrowed value
 * may be freed meanwhile by another thread's write to d, so it is a strong reference there
 * (PyDict_GetItemRef); with the GIL it is borrowed, as before, and the release does nothing. */
static inline PyObject *tok_dict_get(PyObject *d, PyObject *key) {
#ifdef Py_GIL_DISABLED
    PyObject *value = NULL;
    if (PyDict_GetItemRef(d, key, &value) < 0) return NULL;
    return value;
#else
    return PyDict_GetItemWithError(d, key);
#endif
}

static inline void tok_dict_release(PyObject *value) {
#ifdef Py_GIL_DISABLED
    Py_XDECREF(value);
#else
    (void)value;
#endif
}

#endif
