"""Token-id codec dispatcher: the Cython twin when it loads, else the Python one."""

from ._backend import load_twin

_twin = load_twin("ids")

pack_ids = _twin.pack_ids
unpack_ids = _twin.unpack_ids
