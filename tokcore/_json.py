"""JSON member dispatcher: the Cython twin when it loads, else the Python one."""

from ._backend import load_twin

_twin = load_twin("json")

find_member = _twin.find_member
set_member = _twin.set_member
del_member = _twin.del_member

__all__ = ["del_member", "find_member", "set_member"]
