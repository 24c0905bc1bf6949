"""Base64 dispatcher: the Cython twin when it loads, else the Python one."""

from __future__ import annotations

from typing import TYPE_CHECKING

# Checkers read the Python twin, typed and checked with the code; the Cython twin's stub
# declares the same signatures (tests/test_typing.py compares them). At run time the twin
# that loads is used.
if TYPE_CHECKING:
    from ._b64_py import (
        b64_to_ids,
        b64decode,
        b64encode,
        ids_to_b64,
        standard_b64decode,
        standard_b64encode,
        urlsafe_b64decode,
        urlsafe_b64encode,
    )
else:
    from .._backend import load_twin

    _twin = load_twin(__name__)

    b64encode = _twin.b64encode
    b64decode = _twin.b64decode
    standard_b64encode = _twin.standard_b64encode
    standard_b64decode = _twin.standard_b64decode
    urlsafe_b64encode = _twin.urlsafe_b64encode
    urlsafe_b64decode = _twin.urlsafe_b64decode
    ids_to_b64 = _twin.ids_to_b64
    b64_to_ids = _twin.b64_to_ids

__all__ = [
    "b64_to_ids",
    "b64decode",
    "b64encode",
    "ids_to_b64",
    "standard_b64decode",
    "standard_b64encode",
    "urlsafe_b64decode",
    "urlsafe_b64encode",
]
