"""JSON member dispatcher: the Cython twin when it loads, else the Python one."""

from __future__ import annotations

from typing import TYPE_CHECKING

# Checkers read the Python twin, typed and checked with the code; the Cython twin's stub
# declares the same signatures (tests/test_typing.py compares them). At run time the twin
# that loads is used.
if TYPE_CHECKING:
    from ._members_py import del_member, find_member, set_member
else:
    from .._backend import load_twin

    _twin = load_twin(__name__)

    find_member = _twin.find_member
    set_member = _twin.set_member
    del_member = _twin.del_member

__all__ = ["del_member", "find_member", "set_member"]
