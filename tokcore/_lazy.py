"""Descriptors of ``compact_ids(lazy=True)``: the Cython twin when it loads, else the Python one."""

from ._backend import load_twin

_twin = load_twin("lazy")

LazyAttr = _twin.LazyAttr
LazySlot = _twin.LazySlot
