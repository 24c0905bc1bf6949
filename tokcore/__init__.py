"""tokcore: the host-side hot paths of LLM serving, with a Cython and a pure-Python twin.

Every public name is here; the modules behind it are private.
"""

from ._backend import backend_summary
from ._ids import pack_ids, unpack_ids
from .pickling import compact_ids

__version__ = "0.1.0"

#: which twins loaded: "cython", "python" or "mixed"
BACKEND: str = backend_summary()

__all__ = [
    "BACKEND",
    "__version__",
    "compact_ids",
    "pack_ids",
    "unpack_ids",
]
