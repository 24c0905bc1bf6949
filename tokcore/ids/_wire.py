"""Wire-format dispatcher (token ids as JSON, MessagePack, base64, int32): the Cython twin
when it loads, else the Python one."""

from __future__ import annotations

from typing import TYPE_CHECKING

# Checkers read the Python twin, typed and checked with the code; the Cython twin's stub
# declares the same signatures (tests/test_typing.py compares them). At run time the twin
# that loads is used.
if TYPE_CHECKING:
    from ._wire_py import convert_ids, ids_to_json, ids_to_msgpack, json_to_ids, msgpack_to_ids
else:
    from .._backend import load_twin

    _twin = load_twin(__name__)

    ids_to_json = _twin.ids_to_json
    json_to_ids = _twin.json_to_ids
    ids_to_msgpack = _twin.ids_to_msgpack
    msgpack_to_ids = _twin.msgpack_to_ids
    convert_ids = _twin.convert_ids

__all__ = ["convert_ids", "ids_to_json", "ids_to_msgpack", "json_to_ids", "msgpack_to_ids"]
