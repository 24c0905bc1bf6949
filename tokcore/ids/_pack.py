"""Token-id codec dispatcher: the Cython twin when it loads, else the Python one."""

from __future__ import annotations

from typing import TYPE_CHECKING

# Checkers read the Python twin, typed and checked with the code; the Cython twin's stub
# declares the same signatures (tests/test_typing.py compares them). At run time the twin
# that loads is used.
if TYPE_CHECKING:
    from ._pack_py import pack_ids, unpack_ids
else:
    from .._backend import load_twin

    _twin = load_twin(__name__)

    pack_ids = _twin.pack_ids
    unpack_ids = _twin.unpack_ids

__all__ = ["pack_ids", "unpack_ids"]
