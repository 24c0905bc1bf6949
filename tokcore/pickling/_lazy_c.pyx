# cython: language_level=3
# cython: freethreading_compatible=True
"""The descriptors of ``compact_ids(lazy=True)``: the Cython twin of ``_lazy_py``.

The same two data descriptors, with their get, set and delete in C, so that reading or
setting a lazy attribute costs about what a plain attribute costs (a Python ``__get__`` is
ten times that). What a read does with a held placeholder (``on_held``), a missing attribute
and access on the class are the Python twin's (and ``tokcore.pickling``'s): off the hot path.
"""

from cpython.dict cimport PyDict_DelItem, PyDict_GetItemWithError, PyDict_SetItem
from cpython.object cimport PyObject, PyObject_GenericGetDict, Py_TYPE

from tokcore._freethreading cimport tok_dict_get, tok_dict_release
from tokcore.pickling._lazy_py import absent, absent_on_delete, on_class

cdef extern from "Python.h":
    # the two slots of a descriptor's type that the member descriptor of a slot fills
    ctypedef object (*descrgetfunc)(PyObject *, PyObject *, PyObject *)
    ctypedef int (*descrsetfunc)(PyObject *, PyObject *, PyObject *) except -1
    ctypedef struct DescrType "PyTypeObject":
        descrgetfunc tp_descr_get
        descrsetfunc tp_descr_set


cdef class LazyAttr:
    """A lazy attribute kept in the instance ``__dict__`` (a data descriptor)."""

    cdef readonly str name
    cdef readonly object default
    cdef readonly object held_type
    cdef readonly object on_held

    def __init__(self, str name, default, held_type, on_held):
        self.name = name
        self.default = default
        self.held_type = held_type
        self.on_held = on_held

    def __get__(self, obj, owner):
        if obj is None:
            return on_class(self, owner)
        instance_dict = PyObject_GenericGetDict(obj, NULL)
        cdef PyObject *found = tok_dict_get(instance_dict, self.name)  # no GIL: a strong one
        if found is NULL:
            return absent(self, obj)
        value = <object>found
        tok_dict_release(found)
        if type(value) is self.held_type:
            return self.on_held(instance_dict, self.name, value)
        return value

    def __set__(self, obj, value):
        PyDict_SetItem(PyObject_GenericGetDict(obj, NULL), self.name, value)

    def __delete__(self, obj):
        instance_dict = PyObject_GenericGetDict(obj, NULL)
        if PyDict_GetItemWithError(instance_dict, self.name) is NULL:
            absent_on_delete(self, obj)
        try:
            PyDict_DelItem(instance_dict, self.name)
        except KeyError:  # deleted meanwhile (another thread, without the GIL)
            absent_on_delete(self, obj)


cdef class LazySlot:
    """A lazy ``__slots__`` attribute: the slot's member descriptor, wrapped."""

    cdef readonly str name
    cdef readonly object member
    cdef readonly object held_type
    cdef readonly object on_held
    cdef DescrType *member_type

    def __init__(self, str name, member, held_type, on_held):
        cdef DescrType *kind = <DescrType *>Py_TYPE(member)
        if kind.tp_descr_get is NULL or kind.tp_descr_set is NULL:
            raise TypeError(f"{type(member).__name__} is not a data descriptor")
        self.name = name
        self.member = member
        self.held_type = held_type
        self.on_held = on_held
        self.member_type = kind

    def __get__(self, obj, owner):
        if obj is None:
            return self
        value = self.member_type.tp_descr_get(<PyObject *>self.member, <PyObject *>obj,
                                              <PyObject *>owner)
        if type(value) is self.held_type:
            return self.on_held(self, obj, value)
        return value

    def __set__(self, obj, value):
        self.member_type.tp_descr_set(<PyObject *>self.member, <PyObject *>obj,
                                      <PyObject *>value)

    def __delete__(self, obj):
        self.member_type.tp_descr_set(<PyObject *>self.member, <PyObject *>obj, NULL)
